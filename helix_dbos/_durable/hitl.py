"""The human-in-the-loop wait, as workflow code: gate, suspend, wait on ``DBOS.recv``, settle.

Client-executed tools and calls that need approval are recorded as pending, each with
ONE absolute deadline taken from the database's clock (``now() + timeout``) in the
checkpointed suspend transaction. The run then parks (``_durable/workflow.py``): its
workflow ends and frees its queue slot, and a small waiter workflow of the step waits
for all the calls at once::

    loop: collect_answers (checkpointed transaction)    -> calls answered in time, calls timed out,
                                                           seconds to the next deadline
          DBOS.recv(topic of the step, timeout = wait)  -> woken by an answer, or at a deadline

Every answer to a call of the step is sent on the step's one topic to the waiter, so one
``recv`` wakes for any of them; ``collect_answers`` then reads the recorded answers (not
the message) under the calls' row locks and times out, by the database's clock, each
call whose deadline has passed, whatever its place in the step. An answer recorded after
the deadline is ignored, whether or not a worker was alive at the deadline; an answer
recorded before the waiter began is found by its first collect.

Why one loop rather than a ``recv`` per call: the sequence of DBOS operations it records
depends only on checkpointed values (each ``recv``'s result and each collect's output), so
a replay takes the same path; the waiting time is a duration computed by the database and
checkpointed, so a worker's clock never decides a deadline.

The run's continuation then settles the step: an approved call runs as a tool step, the
others become results.
"""

from __future__ import annotations

import asyncio
from typing import Any

from dbos import DBOS

from helix_dbos.answers import answer_topic, outcome_error
from helix_dbos._durable.hooks import fire_hook
from helix_dbos._durable.payloads import ToolJob, ToolOutcome, waiter_workflow_id
from helix_dbos._durable.run_scope import RunScope
from helix_dbos._durable.runtime import current_runtime
from helix_dbos._durable.streaming import StepEvents, live_events_written, outcome_events
from helix_dbos._durable.tool_execution.phases import start_parallel
from helix_dbos._store.records import WaitState
from helix_dbos.tools import ReadOnlyState, ToolContext
from helix_dbos.types import ParsedToolCall, SessionStatus
from helix_dbos.orchestration.status import Change, next_status

WAIT_FOREVER_SECONDS = 10 * 365 * 24 * 3600.0
"""The recv timeout while every waiting call is without ``approval_timeout`` / ``client_timeout``."""

Gates = dict[str, str]
"""``{tool_call_id: "approval" | "client"}`` for the calls of a step that wait."""


async def gate(scope: RunScope, step_no: int, calls: list[ParsedToolCall], base: Any) -> Gates:
    """Which calls wait, and for what: ``client`` tools, and calls that need approval.

    Static gates are decided here; ``require_approval`` callables are user code, so they
    are evaluated in a DBOS step and their verdicts replay from its checkpoint.
    """
    gates: Gates = {}
    dynamic: list[ParsedToolCall] = []
    for call in calls:
        tool = scope.tool(call.name)
        if tool.is_client:
            gates[call.id] = "client"
        elif callable(tool.require_approval):
            dynamic.append(call)
        elif tool.require_approval:
            gates[call.id] = "approval"
    if dynamic:
        jobs = [scope.job(step_no, call, base) for call in dynamic]
        needing: list[str] = await DBOS.run_step_async({"name": "approval_gate"}, evaluate_approval, jobs)
        gates.update({call_id: "approval" for call_id in needing})
    return gates


APPROVAL_READ_ONLY = (
    "require_approval predicates only decide whether a call waits for approval, and this one now asks for it"
    " (as any predicate that raises does)"
)


def evaluate_approval(jobs: list[ToolJob]) -> list[str]:
    """The approval-gate step: ids of the calls whose ``require_approval`` predicate asks
    for approval (it fails closed: a predicate that raises asks). The predicate's
    ``ctx.update_state`` raises :class:`ReadOnlyStateError`: a decision changes nothing."""
    runtime = current_runtime()
    needing = []
    for job in jobs:
        agent = runtime.run_agent(job.agent_name, job.session_id, job.run)
        tool = agent.get_tool(job.call.name)
        assert tool is not None
        ctx = ToolContext(job.session_id, job.call.id, agent.name, job.step, ReadOnlyState(job.base_state, APPROVAL_READ_ONLY))
        try:
            tool_input = tool.parse_input(job.call.arguments)
        except Exception:
            continue  # invalid input never runs: the tool step reports it
        if tool.needs_approval(tool_input, ctx):
            needing.append(job.call.id)
    return needing


def suspension_status(gates: Gates) -> SessionStatus:
    """What the run's session waits as: for a person when any call needs approval, else
    for the client tools' results."""
    change: Change = "suspended_for_approval" if "approval" in gates.values() else "suspended_for_client_tool"
    return next_status(SessionStatus.ACTIVE, change)


async def suspend(scope: RunScope, step_no: int, calls: list[ParsedToolCall], gates: Gates, state: Any) -> None:
    """Record the waiting calls, their deadlines and the waiting status (one checkpointed
    transaction); tell the hooks. The answers go to the step's waiter workflow."""
    rows = [_pending_row(scope, step_no, call, gates[call.id]) for call in calls]
    status = suspension_status(gates)
    req = scope.request
    runtime = current_runtime()
    await live_events_written()  # the step's tool_call events before the requests that gate them
    await asyncio.to_thread(runtime.suspend, req.session_id, req.run, step_no, status, rows)
    for row in rows:
        runtime.log.info(
            "client_tool.suspended", session_id=row["session_id"], run=row["run"], step=step_no,
            tool_call_id=row["tool_call_id"], tool_name=row["tool_name"], kind=row["kind"], timeout=row["timeout"],
        )
    await fire_hook(
        scope.agent.hooks, "on_agent_suspended", status.value, [c.id for c in calls], scope.hook_context(step_no, state)
    )


async def wait_for_answers(session_id: str, run: int, step_no: int, call_ids: list[str]) -> list[dict[str, Any] | None] | None:
    """Wait for every call at once, each until its own deadline (workflow code of the
    waiter). Their answers in call order (None for a call that timed out), or None when
    the run ended meanwhile (it was aborted before the waiter began)."""
    settled: dict[str, dict[str, Any] | None] = {}
    topic = answer_topic(step_no)
    runtime = current_runtime()
    while True:
        open_ids = [c for c in call_ids if c not in settled]
        waiting = WaitState.model_validate(await asyncio.to_thread(runtime.collect_answers, session_id, run, open_ids))
        if waiting.run_ended:
            return None
        settled.update(waiting.answers)
        if len(settled) == len(call_ids):
            return [settled[c] for c in call_ids]
        wait = WAIT_FOREVER_SECONDS if waiting.wait is None else max(0.0, waiting.wait)
        await DBOS.recv_async(topic, timeout_seconds=wait)


async def settle(
    scope: RunScope,
    step_no: int,
    calls: list[ParsedToolCall],
    gates: Gates,
    answers: list[dict[str, Any] | None],
    base: Any,
    events: StepEvents,
) -> list[ToolOutcome]:
    """Run the approved calls (in parallel, from the pre-step state: their tool steps
    stream their events); turn the rest into results, published to ``events``."""
    approved = [
        c for c, a in zip(calls, answers) if gates[c.id] == "approval" and outcome_error("approval", c.id, a) is None
    ]
    outcomes = await start_parallel(scope, step_no, approved, base, events)
    for call, answer in zip(calls, answers):
        if call in approved:
            continue
        if answer is None:
            current_runtime().log.warning(
                "client_tool.timeout", session_id=scope.session_id, run=scope.request.run, step=step_no,
                tool_call_id=call.id, tool_name=call.name, kind=gates[call.id],
            )
        error = outcome_error(gates[call.id], call.id, answer)
        result = None if error is not None or answer is None else answer.get("result")
        answered = ToolOutcome(
            tool_call_id=call.id, tool_name=call.name, success=error is None, result=result, error=error, executed=False
        )
        events.publish(outcome_events(answered))
        outcomes.append(answered)
    return outcomes


def _timeout(scope: RunScope, call: ParsedToolCall, kind: str) -> float | None:
    tool = scope.tool(call.name)
    return tool.client_timeout if kind == "client" else tool.approval_timeout


def _pending_row(scope: RunScope, step_no: int, call: ParsedToolCall, kind: str) -> dict[str, Any]:
    tool = scope.tool(call.name)
    return {
        "session_id": scope.session_id,
        "tool_call_id": call.id,
        "root_session_id": scope.root_session_id,
        "workflow_id": waiter_workflow_id(scope.session_id, scope.request.run, step_no),
        "run": scope.request.run,
        "step": step_no,
        "tool_name": call.name,
        "kind": kind,
        "input": call.arguments,
        "output_schema": tool.output_schema.model_json_schema() if tool.output_schema else None,
        "timeout": _timeout(scope, call, kind),
    }
