"""The DBOS workflows of a run: ``helix_agent_run`` and ``helix_await_answers``.

They are registered when this module is imported, so they exist before ``DBOS.launch()``
recovers pending runs. Their inputs and outputs are portable JSON (a :class:`RunRequest`
or :class:`WaitRequest` in, an :class:`AgentResult` out), so ``dbos workflow get`` shows
them to anyone, and a message that is not portable JSON is never unpickled.

A run that reaches a step with calls waiting for people parks, so that it holds no
queue slot and no thread while people take their time::

    helix:<s>:run:<n>            runs steps; at a waiting step: suspend, run the calls that
                                 do not wait, start the waiter, end (SUCCESS, "continued_by")
    helix:<s>:run:<n>:wait:<k>   not queued: collect + recv until every call of step k is
                                 answered or timed out, then enqueue the continuation
    helix:<s>:run:<n>:step:<k>   on the run's queue: settles step k, runs on to the end
                                 (or parks again)

Each workflow's output names the next (``continued_by``); helix's trigger makes the
newest one the run's workflow (``helix.runs.workflow_id``), the one DBOS's tools act on.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from dbos import DBOS, SetWorkflowID, WorkflowSerializationFormat

from helix_dbos._durable import hitl
from helix_dbos._durable.loop import AgentLoop
from helix_dbos._durable.payloads import (
    WAITER_WORKFLOW_NAME,
    WORKFLOW_NAME,
    ParkedStep,
    RunRequest,
    RunStart,
    WaitRequest,
    waiter_workflow_id,
)
from helix_dbos._durable.run_scope import RunScope
from helix_dbos._durable.runtime import RunContext, current_runtime
from helix_dbos._durable.streaming import live_events_written
from helix_dbos._durable.toolset_runs import list_toolsets, release_toolsets, with_toolset_tools
from helix_dbos.agents import AgentConfig
from helix_dbos.errors import AgentNotRegisteredError, ToolCallLostError
from helix_dbos.observability import points as observe
from helix_dbos._text import storable
from helix_dbos.types import AgentResult

_PORTABLE = WorkflowSerializationFormat.PORTABLE


@DBOS.workflow(name=WORKFLOW_NAME, serialization_type=_PORTABLE)
async def agent_run_workflow(request: dict[str, Any]) -> dict[str, Any]:
    """Run one agent run (``execute`` or ``resume``) of a session to its end, or to a step
    that waits for people; a continuation (``request["parked"]``) takes it up from there."""
    req = RunRequest.model_validate(request)
    refusal = _foreign_copy(req)
    if refusal is not None:
        return _ended(req, "failed", refusal)
    runtime = current_runtime()
    try:
        agent = runtime.agent(req.agent_name)
    except AgentNotRegisteredError as exc:  # enqueued by a process that could not know: the run ends failed
        runtime.log.error("run.failed", session_id=req.session_id, run=req.run, error=str(exc))
        await asyncio.to_thread(runtime.fail_run, req, str(exc))
        return _ended(req, "failed", str(exc))
    if req.parked is None:
        began = await asyncio.to_thread(runtime.begin_run, req, agent.initial_state())
    else:
        began = await asyncio.to_thread(runtime.continue_run, req)
    start = RunStart.model_validate(began)
    if start.refused is not None:
        return _ended(req, "failed" if req.parked is None else "aborted", start.refused)
    began_here = runtime.began_here(req.workflow_id)
    with observe.run(req, began_here is not None) as observed:
        try:
            result = await _run_loop(agent, req, start, began_here)
        except Exception as exc:  # DBOS's cancellation is a BaseException and passes through
            error = storable(f"{type(exc).__name__}: {exc}")
            bug = not isinstance(exc, ToolCallLostError)  # a bug: its traceback shown
            runtime.log.error("run.failed", session_id=req.session_id, run=req.run, error=error, exc_info=bug)
            observed.failed(exc)
            await live_events_written()  # the step's events before the run's error
            await asyncio.to_thread(runtime.fail_run, req, error)
            result = AgentResult(session_id=req.session_id, status="failed", error=error, stop_reason="error")
        else:
            if isinstance(result, AgentResult) and result.status == "failed":  # the model failed, or the budget ran out
                runtime.log.error("run.failed", session_id=req.session_id, run=req.run, error=result.error)
        observed.finish(result)
    if isinstance(result, ParkedStep):
        return await _park(req, result)
    return result.model_dump(mode="json")


async def _run_loop(
    agent: AgentConfig, req: RunRequest, start: RunStart, began_here: RunContext | None
) -> AgentResult | ParkedStep:
    """The run's agent loop, with the tools its toolsets listed for the run
    (``_durable/toolset_runs.py``); what the run held of them here is let go at the end.
    ``began_here``: the run's context its first transaction read, in its first execution."""
    listed = await list_toolsets(agent, req)
    run_agent = with_toolset_tools(agent, req, listed)
    try:
        with current_runtime().running(req, run_agent):
            scope = RunScope(run_agent, req, agent_run_workflow, first_execution=began_here is not None, listed=listed)
            return await AgentLoop(scope).run(start, began_here)
    finally:
        await release_toolsets(agent, req, listed)


@DBOS.workflow(name=WAITER_WORKFLOW_NAME, serialization_type=_PORTABLE)
async def await_answers_workflow(request: dict[str, Any]) -> dict[str, Any]:
    """Wait for the answers of a parked step (``_durable/hitl.py``), then start the run's
    continuation on the run's queue. Holds no queue slot; a recovered waiter waits on."""
    wait = WaitRequest.model_validate(request)
    root = wait.continuation.root_session_id or wait.session_id
    parent = wait.continuation.trace_parent
    with observe.wait(wait.session_id, root, wait.run, wait.step, wait.tool_call_ids, parent) as answered:
        answers = await hitl.wait_for_answers(wait.session_id, wait.run, wait.step, wait.tool_call_ids)
        answered(answers)
    run = wait.continuation
    if answers is None or run.parked is None:
        return _ended(run, "aborted", f"run {wait.run} of session {wait.session_id!r} ended while it waited")
    parked = run.parked.model_copy(update={"answers": dict(zip(wait.tool_call_ids, answers))})
    continuation = run.model_copy(update={"parked": parked})
    with SetWorkflowID(continuation.workflow_id):
        if parked.queue is None:
            await DBOS.start_workflow_async(agent_run_workflow, continuation.model_dump(mode="json"))
        else:
            await DBOS.enqueue_workflow_async(parked.queue, agent_run_workflow, continuation.model_dump(mode="json"))
    return {"continued_by": continuation.workflow_id}


async def _park(req: RunRequest, parked: ParkedStep) -> dict[str, Any]:
    """End this workflow at a step that waits; its waiter takes over (``continued_by``)."""
    wait = WaitRequest(
        session_id=req.session_id, run=req.run, step=parked.step, tool_call_ids=list(parked.gates),
        continuation=req.model_copy(update={"parked": parked}),
    )
    waiter_id = waiter_workflow_id(req.session_id, req.run, parked.step)
    with SetWorkflowID(waiter_id):
        await DBOS.start_workflow_async(await_answers_workflow, wait.model_dump(mode="json"))
    status = hitl.suspension_status(parked.gates).value
    waiting = AgentResult(session_id=req.session_id, status=status, step_count=parked.step - 1)
    return {**waiting.model_dump(mode="json"), "continued_by": waiter_id}


def _ended(req: RunRequest, status: Literal["failed", "aborted"], error: str) -> dict[str, Any]:
    """The result of a workflow that found its run not its own to run (nothing written)."""
    stop_reason = "aborted" if status == "aborted" else "error"
    return AgentResult(session_id=req.session_id, status=status, error=error, stop_reason=stop_reason).model_dump(
        mode="json"
    )


def _foreign_copy(req: RunRequest) -> str | None:
    """Why this workflow must not touch the session: it is not the run's own workflow
    (``dbos workflow fork`` made a copy under a new id), or None."""
    own = req.workflow_id
    if DBOS.workflow_id == own:
        return None
    return (
        f"workflow {DBOS.workflow_id} is a copy of {own} (dbos workflow fork); a helix run cannot be forked that way"
        f" and this copy changed nothing. Fork the session instead: helix-dbos fork {req.session_id} --from-step N"
    )
