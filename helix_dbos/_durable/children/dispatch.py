"""Sub-agent dispatch, as workflow code: each call starts the child agent as a DBOS child
workflow with its own session, and its result becomes the parent's tool result. A remote
sub-agent's call runs on another helix server (``_durable/children/remote_dispatch.py``), after the
local children.

Children start after phase 2, at most ``max_tool_concurrency`` at once, started and awaited
in call order, so a replay finds every child at the same position.

A child's session id is derived (``<parent>-sub-<call id>``), so another caller may have
taken it. Right before it starts a child, the parent claims the child's session in a
checkpointed transaction (``helix_claim_child``): it creates the row with its own id and
call id as the parent, or finds it created by this very call (a replay). A session that
exists otherwise is never adopted: no workflow is started or joined, the model gets an
error result, and that session is not touched. The child's run checks the recorded parent
again before it begins (``AgentRuntime.begin_run``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from dbos import DBOS, SetWorkflowID

from helix_dbos._durable.hooks import fire_hook
from helix_dbos._durable.children.remote_dispatch import run_remote_child
from helix_dbos._durable.payloads import RunRequest, continued_by, run_workflow_id
from helix_dbos._durable.run_scope import RunScope
from helix_dbos._durable.runtime import current_runtime
from helix_dbos._durable.streaming import StepEvents, live_events_written, tool_result_events
from helix_dbos.events import SubAgentFinishEvent, SubAgentStartEvent
from helix_dbos.observability import points as observe
from helix_dbos.orchestration import create_sub_agent_result_message
from helix_dbos.remote import RemoteSubAgentSpec
from helix_dbos.subagents import SubAgentSpec, child_session_id
from helix_dbos._text import storable
from helix_dbos.types import SUB_AGENT_TOOL_PREFIX, AgentResult, AgentStatus, ParsedSubAgentCall, ToolResultMessage

Started = tuple[ParsedSubAgentCall, RunRequest, Any, observe.LaunchObservation]


async def run_children(
    scope: RunScope, step_no: int, state: Any, calls: list[ParsedSubAgentCall], events: StepEvents
) -> list[ToolResultMessage]:
    """Run each call's child to its end; their results. ``subagent_start`` is streamed
    before a child starts, its ``subagent_finish`` and tool result when it ends; the
    child's own events reach the parent's stream as the child writes them
    (``helix.relay_to_parent``).

    While children run the parent waits for them: ``on_agent_suspended("awaiting_children",
    call ids)`` fires before the first starts, ``on_agent_resumed("awaiting_children")``
    after the last ended, with the pre-step state.
    """
    results: list[ToolResultMessage] = []
    dispatched: list[tuple[ParsedSubAgentCall, RunRequest]] = []
    remote: list[tuple[ParsedSubAgentCall, RemoteSubAgentSpec]] = []
    for call in calls:
        tool = scope.agent.get_tool(f"{SUB_AGENT_TOOL_PREFIX}{call.agent_type}")
        if tool is not None and isinstance(tool.sub_agent, RemoteSubAgentSpec):
            remote.append((call, tool.sub_agent))
            continue
        request, error = child_request(scope, call)
        if request is None:
            _dispatch_failed(scope, call, error or "dispatch failed")
            results.append(_sub_agent_error(call, error or "dispatch failed"))
        else:
            dispatched.append((call, request))
    if not dispatched and not remote:
        return results
    hooks, ctx = scope.agent.hooks, scope.hook_context(step_no, state)
    waiting = [call.id for call, _ in dispatched] + [call.id for call, _ in remote]
    await fire_hook(hooks, "on_agent_suspended", "awaiting_children", waiting, ctx)
    window = max(1, scope.agent.max_tool_concurrency)
    running: list[Started] = []
    for call, request in dispatched:
        if len(running) >= window:
            results.append(await _finish_child(running.pop(0), events))
        refusal = await asyncio.to_thread(current_runtime().claim_child, request)
        if refusal is not None:
            _dispatch_failed(scope, call, refusal)
            results.append(_sub_agent_error(call, f"Sub-agent {call.agent_type} was not started: {refusal}"))
            continue
        start = SubAgentStartEvent(tool_call_id=call.id, session_id=request.session_id, agent=request.agent_name)
        events.publish([(f"child_start:{call.id}", start)])
        await live_events_written()  # the parent's events before the child's, relayed
        observed = observe.sub_agent(call.id, call.agent_type, request.session_id)
        with SetWorkflowID(run_workflow_id(request.session_id, 1)), observed.launching():
            handle = await DBOS.start_workflow_async(scope.run_workflow, observed.request(request))
        running.append((call, request, handle, observed))
    for item in running:
        results.append(await _finish_child(item, events))
    for call, spec in remote:  # on another helix server (_durable/children/remote_dispatch.py)
        results.append(await run_remote_child(scope, step_no, call, spec, events))
    await fire_hook(hooks, "on_agent_resumed", "awaiting_children", ctx)
    return results


def child_request(scope: RunScope, call: ParsedSubAgentCall) -> tuple[RunRequest | None, str | None]:
    """The child's run request, or why there is none (an error result for the model)."""
    tool = scope.agent.get_tool(f"{SUB_AGENT_TOOL_PREFIX}{call.agent_type}")
    if tool is None or not isinstance(tool.sub_agent, SubAgentSpec):
        return None, f"Unknown sub-agent: {call.agent_type!r} is not a sub-agent of this agent"
    if call.parse_error is not None:
        return None, f"Invalid arguments for sub-agent {call.agent_type}: {call.parse_error}"
    try:
        child_input = storable(tool.sub_agent.child_input(tool.parse_input(call.input)))  # an input_mapper's text
    except Exception as exc:
        return None, str(exc)
    request = RunRequest(
        session_id=child_session_id(scope.session_id, call.id),
        run=1,
        agent_name=tool.sub_agent.agent.name,
        input=child_input,
        parent_session_id=scope.session_id,
        parent_tool_call_id=call.id,
        root_session_id=scope.root_session_id,
    )
    return request, None


async def _finish_child(item: Started, events: StepEvents) -> ToolResultMessage:
    call, request, handle, observed = item
    try:
        result = AgentResult.model_validate(await final_output(await handle.get_result()))
    except Exception as exc:  # the child workflow failed or was cancelled
        status: AgentStatus = "aborted" if "cancel" in str(exc).lower() else "failed"
        result = AgentResult(session_id=request.session_id, status=status, error=str(exc))
    observed.finished(result.status, result.error)
    if result.status == "completed":
        message = create_sub_agent_result_message(call.id, call.agent_type, result=result.output, success=True)
    else:
        message = _sub_agent_error(call, f"Sub-agent {call.agent_type} {result.status}: {result.error or 'no output'}")
    finish = SubAgentFinishEvent(tool_call_id=call.id, session_id=request.session_id, status=result.status)
    events.publish([(f"child_finish:{call.id}", finish), *tool_result_events([message])])
    return message


async def final_output(output: Any) -> Any:
    """A run's final result from its workflow's ``output``: a run that parked names its
    waiter, the waiter its continuation (each awaited as one recorded ``DBOS.getResult``)."""
    while (next_id := continued_by(output)) is not None:
        output = await DBOS.get_result_async(next_id)
    return output


def _dispatch_failed(scope: RunScope, call: ParsedSubAgentCall, error: str) -> None:
    current_runtime().log.error(
        "subagent.dispatch_failed", session_id=scope.session_id, tool_call_id=call.id, agent_type=call.agent_type,
        error=error,
    )


def _sub_agent_error(call: ParsedSubAgentCall, error: str) -> ToolResultMessage:
    return create_sub_agent_result_message(call.id, call.agent_type, success=False, error=error)
