"""Running a step's tools: classification, phase 1 in parallel, phase 2 in order.

Every tool call is one DBOS step. Parallel calls get their step ids reserved in call order
before any of them runs, so a replay finds each checkpoint at the same position whatever
order they finished in.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from dbos import DBOS

from helix_dbos._durable.payloads import ToolJob, ToolOutcome, tool_outcome
from helix_dbos._durable.run_scope import RunScope
from helix_dbos._durable.runtime import current_runtime
from helix_dbos._durable.streaming import StepEvents, outcome_events
from helix_dbos._durable.tool_execution.attempts import record_attempts
from helix_dbos._durable.tool_execution.call import run_tool
from helix_dbos.types import FINISH_TOOL_NAME, SUB_AGENT_TOOL_PREFIX, ParsedSubAgentCall, ParsedToolCall


@dataclass
class Classified:
    """A step's calls by how they run."""

    regular: list[ParsedToolCall] = field(default_factory=list)
    finishers: list[ParsedToolCall] = field(default_factory=list)
    unknown: list[ParsedToolCall] = field(default_factory=list)
    children: list[ParsedSubAgentCall] = field(default_factory=list)
    companions: list[ParsedToolCall] = field(default_factory=list)


def classify(scope: RunScope, calls: list[ParsedToolCall]) -> Classified:
    """Regular tools (phase 1), finishWith tools (phase 2), unknown names, sub-agent calls,
    companion tool calls (their own phase)."""
    found = Classified()
    for call in calls:
        tool = scope.agent.get_tool(call.name)
        if tool is None and call.name.startswith(SUB_AGENT_TOOL_PREFIX) or tool is not None and tool.is_sub_agent:
            agent_type = call.name.removeprefix(SUB_AGENT_TOOL_PREFIX)
            found.children.append(
                ParsedSubAgentCall(id=call.id, agent_type=agent_type, input=call.arguments, parse_error=call.parse_error)
            )
        elif tool is None or tool.name == FINISH_TOOL_NAME:
            found.unknown.append(call)
        elif tool.companion:
            found.companions.append(call)
        elif tool.finish_with:
            found.finishers.append(call)
        else:
            found.regular.append(call)
    return found


async def start_parallel(
    scope: RunScope, step_no: int, calls: list[ParsedToolCall], base_state: Any, events: StepEvents
) -> list[ToolOutcome]:
    """Run calls concurrently under the agent's cap; their step ids are reserved first, in
    call order. When they all start at once in the run's first execution, their attempts
    are recorded together (``record_attempts``) while their steps begin, and each body
    waits for that record."""
    reservations = [DBOS.reserve_step() for _ in calls]
    cap = max(1, scope.agent.max_tool_concurrency)
    jobs = [scope.job(step_no, call, base_state) for call in calls]
    if scope.first_execution and 1 < len(calls) <= cap:
        record = _record_together(jobs)
        for job in jobs:
            job.attempt_record = record
    limit = asyncio.Semaphore(cap)

    async def run_one(reservation: Any, job: ToolJob) -> ToolOutcome:
        async with limit:
            return await _checkpointed(job, reservation.run_async, events)

    return list(await asyncio.gather(*(run_one(r, job) for r, job in zip(reservations, jobs))))


def _record_together(jobs: list[ToolJob]) -> asyncio.Future[None]:
    """Start recording this process's attempts at the jobs' calls in one statement, off
    the loop; the future ends as the record does (a failure reaches each body that waits)."""
    record = asyncio.ensure_future(asyncio.to_thread(record_attempts, current_runtime(), jobs))
    record.add_done_callback(_observed)
    return record


def _observed(record: asyncio.Future[None]) -> None:
    """Mark the record's failure seen: when no body waited for it (each call's input was
    refused, or the run stopped first), it is no error of the run's."""
    if not record.cancelled():
        record.exception()


async def run_tool_step(
    scope: RunScope, step_no: int, call: ParsedToolCall, base_state: Any, events: StepEvents
) -> ToolOutcome:
    """One tool, as one DBOS step, now."""
    return await _checkpointed(scope.job(step_no, call, base_state), DBOS.run_step_async, events)


async def _checkpointed(job: ToolJob, run_step: Callable[..., Awaitable[Any]], events: StepEvents) -> ToolOutcome:
    """The call's tool step, run with ``run_step``; its outcome is recorded when DBOS does
    not save the step's checkpoint (``_durable/tool_execution/held_outcomes.py``). Its events (what the tool
    emitted, then its result) are published once the checkpoint is saved, so the stream
    holds the checkpointed outcome, never one a crash made the step run again for."""
    call = job.call
    key = job.key
    held = current_runtime().outcomes
    try:
        checkpoint = await run_step({"name": f"tool:{call.name}"}, run_tool, job)
    except BaseException:
        held.unsaved(key)  # rare (an aborted run): a blocking insert, on the loop
        raise
    held.saved(key)
    outcome = tool_outcome(call, checkpoint)
    events.publish(outcome_events(outcome))
    return outcome
