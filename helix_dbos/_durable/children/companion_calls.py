"""Persistent sub-agents ("companions") as workflow code: the companion tools' phase and
the notices of non-blocking companions (definitions: ``helix_dbos/companions.py``).

The companion calls of a step run after phase 2, one after another in call order, each a
short fixed sequence of DBOS operations, so a replay takes the same path::

    spawnAgent / sendMessage   helix_companion_deliver (checkpointed: creates the child's
                               session and its companions row, or finds them; asks a
                               running child to stop after its step; plans the run number)
                               [DBOS.getResult of the interrupted run] -> start the child's
                               run as a child workflow -> [DBOS.getResult, blocking mode]
    listChildren / getChildStatus   helix_companion_view (a checkpointed read)
    terminateChild             helix_companion_terminate (ends the run aborted) -> cancel its workflow
    waitForResult              helix_companion_view -> DBOS.getResult -> helix_companion_collected

A non-blocking companion's run that ends writes a notice for its parent (the trigger
``helix.notice_companion_end``); the parent's next step takes the notices (``helix_companion_notices``,
checkpointed) and puts each in its transcript as a user message before the model's call.
"""

from __future__ import annotations

import asyncio
from typing import Any

from dbos import DBOS, SetWorkflowID
from pydantic import ValidationError

from helix_dbos import companions as spec
from helix_dbos._durable.children.companion_steps import Delivery
from helix_dbos._durable.children.dispatch import final_output
from helix_dbos._durable.payloads import RunRequest
from helix_dbos._durable.run_scope import RunScope
from helix_dbos._durable.runtime import current_runtime
from helix_dbos._durable.streaming import StepEvents, live_events_written, tool_result_events
from helix_dbos.observability import points as observe
from helix_dbos.orchestration import create_tool_result_message
from helix_dbos.types import AgentResult, AgentStatus, ParsedToolCall, ToolResultMessage, UserMessage


async def take_notices(scope: RunScope, step_no: int) -> list[UserMessage]:
    """The notices of the parent's non-blocking companions that ended, for this step's
    transcript (nothing, and no DBOS operation, for an agent without persistent agents)."""
    if not scope.agent.persistent_agents:
        return []
    runtime = current_runtime()
    taken = await asyncio.to_thread(runtime.companions.notices, scope.session_id, scope.request.run, step_no)
    return [UserMessage.model_validate(m) for m in taken]


async def run_companion_calls(
    scope: RunScope, step_no: int, calls: list[ParsedToolCall], events: StepEvents
) -> list[ToolResultMessage]:
    """Each companion call, in call order; their results (each streamed when it is known)."""
    results = []
    for call in calls:
        message = await _run_one(scope, step_no, call)
        events.publish(tool_result_events([message]))
        results.append(message)
    return results


async def _run_one(scope: RunScope, step_no: int, call: ParsedToolCall) -> ToolResultMessage:
    tool = scope.tool(call.name)
    try:
        args = tool.parse_input(call.arguments) if call.parse_error is None else None
    except (ValidationError, ValueError) as exc:
        return _error(call, str(exc))
    if args is None:
        return _error(call, f"Invalid arguments for tool '{call.name}': {call.parse_error}")
    with observe.companion_call(call.id, call.name):
        outcome = await _HANDLERS[call.name](scope, step_no, call, args)
    if isinstance(outcome, str):
        return _error(call, outcome)
    return create_tool_result_message(call.id, call.name, result=outcome, success=True)


async def _spawn(scope: RunScope, step_no: int, call: ParsedToolCall, args: Any) -> dict[str, Any] | str:
    return await _deliver(scope, call, args.message, args.agentType, args.name)


async def _send(scope: RunScope, step_no: int, call: ParsedToolCall, args: Any) -> dict[str, Any] | str:
    return await _deliver(scope, call, args.message, None, args.name)


async def _deliver(
    scope: RunScope, call: ParsedToolCall, message: str, agent_type: str | None, name: str | None
) -> dict[str, Any] | str:
    """Start the companion's next run with ``message`` (after its run in progress stopped);
    a blocking companion's result, or that it started."""
    runtime = current_runtime()
    delivery = Delivery.model_validate(await asyncio.to_thread(
        runtime.companions.deliver, scope.agent.name, scope.session_id, scope.root_session_id, agent_type, name
    ))
    if delivery.refused is not None:
        return delivery.refused
    if delivery.interrupting is not None:  # the message interrupts: the run in progress stops after its step
        await _final_result(delivery.session_id, await DBOS.get_result_async(delivery.interrupting))
    request = RunRequest(
        session_id=delivery.session_id, run=delivery.run, agent_name=delivery.agent_name, input=message,
        parent_session_id=scope.session_id, parent_tool_call_id=spec.companion_owner(delivery.name),
        root_session_id=scope.root_session_id, trace_parent=observe.trace_parent(),
    )
    await live_events_written()  # the parent's events before the child's
    with SetWorkflowID(request.workflow_id):
        handle = await DBOS.start_workflow_async(scope.run_workflow, request.model_dump(mode="json"))
    started = {"name": delivery.name, "sessionId": delivery.session_id}
    if delivery.mode == "non-blocking":
        return {**started, "status": "started"}
    result = await _final_result(delivery.session_id, await handle.get_result())
    return {**started, **_result_view(result)}


async def _list(scope: RunScope, step_no: int, call: ParsedToolCall, args: Any) -> dict[str, Any] | str:
    return dict(await asyncio.to_thread(current_runtime().companions.view, scope.session_id, None))


async def _status(scope: RunScope, step_no: int, call: ParsedToolCall, args: Any) -> dict[str, Any] | str:
    view = await asyncio.to_thread(current_runtime().companions.view, scope.session_id, args.name)
    if "error" in view:
        return str(view["error"])
    return dict(view["child"])


async def _terminate(scope: RunScope, step_no: int, call: ParsedToolCall, args: Any) -> dict[str, Any] | str:
    reason = args.reason or f"terminated by its parent ({call.id})"
    done = await asyncio.to_thread(current_runtime().companions.terminate, scope.session_id, args.name, reason)
    if "error" in done:
        return str(done["error"])
    if done["workflow_id"] is not None:
        await DBOS.cancel_workflow_async(done["workflow_id"])
    return dict(done["child"])


async def _wait(scope: RunScope, step_no: int, call: ParsedToolCall, args: Any) -> dict[str, Any] | str:
    runtime = current_runtime()
    view = await asyncio.to_thread(runtime.companions.view, scope.session_id, args.name)
    if "error" in view:
        return str(view["error"])
    child = view["child"]
    if view["workflow_id"] is None:
        return dict(child)  # nothing in progress: its latest answer
    result = await _final_result(child["sessionId"], await DBOS.get_result_async(view["workflow_id"]))
    await asyncio.to_thread(runtime.companions.collected, child["sessionId"], view["run"], scope.request.run, step_no)
    return {"name": child["name"], "sessionId": child["sessionId"], **_result_view(result)}


async def _final_result(session_id: str, output: Any) -> AgentResult:
    try:
        return AgentResult.model_validate(await final_output(output))
    except Exception as exc:  # the run's workflow was cancelled (terminated, aborted) or failed
        status: AgentStatus = "aborted" if "cancel" in str(exc).lower() else "failed"
        return AgentResult(session_id=session_id, status=status, error=str(exc))


def _result_view(result: AgentResult) -> dict[str, Any]:
    if result.status == "completed":
        return {"status": "completed", "output": result.output}
    return {"status": result.status, "error": result.error or "no output"}


def _error(call: ParsedToolCall, error: str) -> ToolResultMessage:
    return create_tool_result_message(call.id, call.name, success=False, error=error)


_HANDLERS = {
    spec.SPAWN: _spawn, spec.SEND: _send, spec.LIST: _list, spec.STATUS: _status, spec.TERMINATE: _terminate,
    spec.WAIT: _wait,
}
