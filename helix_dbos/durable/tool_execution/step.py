"""Step bodies ("activities"): the code that runs inside a DBOS step, with its I/O.

Workflow code calls them through DBOS (``DBOS.run_step_async({"name": "llm"}, call_llm,
...)``), so each runs once and replays from its checkpoint. They take only plain,
JSON-able arguments and the process's :class:`AgentRuntime`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from helix_dbos.durable.deltas import LiveState, StepDeltas
from helix_dbos.durable.hooks import fire_hook
from helix_dbos.durable.payloads import ToolOutcome
from helix_dbos.durable.runtime import current_runtime
from helix_dbos.durable.tool_execution.call import ToolCall, call_digest, run_call
from helix_dbos.events import CustomEvent
from helix_dbos.llm import generate_with_retry
from helix_dbos.observability import points as observe
from helix_dbos.state import StateTracker
from helix_dbos.store.records import RecordedOutcome
from helix_dbos.text import storable
from helix_dbos.tools import ReadOnlyState, ToolContext
from helix_dbos.types import Message, ParsedToolCall, StepResult, StepResultAdapter, Usage


@dataclass
class ToolJob:
    """What a tool step needs: the call and the state it starts from."""

    agent_name: str
    session_id: str
    run: int
    step: int
    call: ParsedToolCall
    base_state: dict[str, Any]
    ran_before: bool = True
    """Whether an earlier execution of the run's workflow may have run this step; when not,
    no outcome can be recorded for it and the step does not look for one."""


async def call_llm(
    agent_name: str, messages: list[Message], session_id: str, run: int, step: int
) -> dict[str, Any]:
    """The LLM step; transient errors are retried inside it. Its checkpoint is JSON:
    ``{"result": StepResult, "usage": Usage}`` (read back with :func:`llm_output`), with
    text Postgres cannot store replaced (``helix_dbos.text``), so every tool sees the
    call ids and arguments the transcript records. A model that
    streams sends its token deltas to the session's consumers as they arrive
    (``durable/deltas.py``)."""
    runtime = current_runtime()
    agent = runtime.agent(agent_name)
    deltas = StepDeltas(runtime.deltas, session_id, run, step)
    with observe.model_call(agent.llm_config.model, session_id, messages) as answered:
        result, usage = await generate_with_retry(
            runtime.llm, messages, agent.tool_specs(), agent.llm_config, agent.output_schema, on_delta=deltas
        )
        answered(result, usage)
    await deltas.flush()
    return {"result": storable(checkpoint_json(result)), "usage": checkpoint_json(usage)}


def llm_output(checkpoint: dict[str, Any]) -> tuple[StepResult, Usage]:
    """The LLM step's result and usage, from its JSON checkpoint."""
    return StepResultAdapter.validate_python(checkpoint["result"]), Usage.model_validate(checkpoint["usage"])


async def run_tool(job: ToolJob) -> dict[str, Any]:
    """One tool step: validate the input, run the tool within its lifetime (timeout,
    interrupt, abort: durable/tool_execution/call.py), record its state writes.

    A tool that raises, times out or gets invalid input becomes an error result:
    self-healing. An outcome recorded for the call (the step ran before, and its checkpoint
    was not saved) is returned without running the tool again. The outcome returned is
    held in memory until its checkpoint is saved (``HeldOutcomes``). Its checkpoint
    is a :class:`ToolOutcome` as JSON, with text Postgres cannot store (in the result,
    the error, state writes and events) replaced (``helix_dbos.text``).
    """
    runtime = current_runtime()
    agent = runtime.agent(job.agent_name)
    tool = agent.get_tool(job.call.name)
    assert tool is not None, "the loop only schedules known tools"
    key = (job.session_id, job.step, job.call.id, call_digest(job.call))
    if job.ran_before:
        recorded = await asyncio.to_thread(runtime.recorded_tool_outcome, *key)
        if recorded is not None:
            return recorded
    events: list[dict[str, Any]] = []

    def emit(name: str, data: Any) -> None:
        events.append(CustomEvent(name=name, data=data, tool_call_id=job.call.id).to_row())

    tracker = StateTracker(job.base_state, array_delta_mode=True, schema=agent.state_schema)
    live = LiveState(tracker, runtime.deltas, job.session_id, job.run, job.step, job.call.id, tool.name)
    ctx = ToolContext(job.session_id, job.call.id, agent.name, job.step, live, emit=emit)
    call = ToolCall(tool, job.call, ctx, tracker, key, events)
    try:
        if job.call.parse_error is not None:
            raise ValueError(f"Invalid arguments for tool '{tool.name}': {job.call.parse_error}")
        tool_input = tool.parse_input(job.call.arguments)
    except Exception as exc:
        return tool_checkpoint(call.failed(exc))
    await fire_hook(agent.hooks, "before_tool", job.call, ctx)

    def recorded(outcome: ToolOutcome) -> RecordedOutcome:
        return RecordedOutcome(
            session_id=job.session_id, step=job.step, tool_call_id=job.call.id, run=job.run,
            tool_name=tool.name, call_digest=key[3], outcome=tool_checkpoint(outcome),
        )

    def record(outcome: ToolOutcome) -> None:
        runtime.record_tool_outcome(recorded(outcome))

    with observe.tool_call(tool.name, job.call.id, job.call.arguments) as ended:
        outcome = await run_call(call, tool_input, agent.timeout_of(tool), runtime.run_watch, job.run, record)
        ended(outcome)
    if outcome.writes:
        await fire_hook(agent.hooks, "on_state_change", tracker.get_state(), ctx)
    checkpoint = recorded(outcome)
    if not call.abandoned:  # the body's own outcome: held until DBOS saves this checkpoint
        runtime.outcomes.hold(checkpoint)
    return checkpoint.outcome


def tool_checkpoint(outcome: ToolOutcome) -> dict[str, Any]:
    """A tool outcome as the JSON its step checkpoints and records, storable in Postgres,
    without what the step already says: the tool's name (the step is ``tool:<name>``) and
    ``success`` when true (read back with :func:`tool_outcome`)::

        >>> tool_checkpoint(ToolOutcome(tool_call_id="a", tool_name="t", success=True, result={"ok": 1}, ms=0.2))
        {'tool_call_id': 'a', 'result': {'ok': 1}, 'ms': 0.2}
        >>> tool_checkpoint(ToolOutcome(tool_call_id="a", tool_name="t", success=False, error="no"))
        {'tool_call_id': 'a', 'success': False, 'error': 'no'}

    The call's id stays, though :func:`tool_outcome` does not need it: a checkpoint says
    which call it answers to whoever reads it with DBOS's tools.
    """
    data = checkpoint_json(outcome)
    del data["tool_name"]
    if outcome.success:
        del data["success"]
    return storable(data)


def tool_outcome(call: ParsedToolCall, checkpoint: dict[str, Any]) -> ToolOutcome:
    """The outcome of ``call``'s tool step, from its checkpoint; what the step says
    (the call's id, the tool's name) and ``success`` (true unless said) are filled in
    when the checkpoint leaves them out::

        >>> tool_outcome(ParsedToolCall(id="a", name="t", arguments={}), {"result": {"ok": 1}})
        ToolOutcome(tool_call_id='a', tool_name='t', success=True, result={'ok': 1}, error=None, writes=[], \
ms=0.0, events=[], executed=True)
    """
    said = {"tool_call_id": call.id, "tool_name": call.name, "success": True}
    return ToolOutcome.model_validate({**said, **checkpoint})


def checkpoint_json(model: BaseModel) -> dict[str, Any]:
    """``model`` as the JSON of a checkpoint: fields at their defaults are left out (read
    back, they are their defaults again), except a step result's ``type``, which says what
    kind of result it is.

        >>> checkpoint_json(Usage(input_tokens=100, total_tokens=100))
        {'input_tokens': 100, 'total_tokens': 100}
        >>> checkpoint_json(StepResultAdapter.validate_python({"type": "text", "content": "hi"}))
        {'type': 'text', 'content': 'hi'}
    """
    data = model.model_dump(mode="json", exclude_defaults=True)
    kind = getattr(model, "type", None)
    return data if kind is None else {"type": kind, **data}


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
        agent = runtime.agent(job.agent_name)
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
