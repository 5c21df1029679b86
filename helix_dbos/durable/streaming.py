"""A step's durable events: how each reaches the stream exactly once.

Each event of a step gets a key unique in its session, ``<run>.<step>.<part>``, so writing
it twice writes it once. Workflow code publishes the events derived from a checkpoint as
soon as DBOS saved it: the model's ``text`` and ``tool_call`` events after the LLM step,
a tool's custom events and ``tool_result`` after its tool step. Publishing hands them to
the runtime's :class:`~helix_dbos.store.live_events.LiveEventWriter`, which writes them
off the run's path; a replay derives the same events under the same keys and writes
nothing. What workflow code produces in between (a sub-agent's start and finish, a
companion's result, a settled approval, a state patch that more of the step follows) is
published the same way. The commit gets every keyed event of the step and writes those
still missing, with ``step_finish``, the terminal events and the next step's
``step_start`` (``helix.commit_step``)::

    events = StepEvents(session_id="s1", run=1, step=2)
    events.publish([("child_start:t1", start)])                     # in the stream soon
    events.add([("step_finish", StepFinishEvent(step=2))])           # written by the commit
    commit = StepCommit(..., events=events.all)

``run_start`` and the first ``step_start`` are written as the run begins. Before a
transaction that writes unkeyed events (a suspension, a failed run) or starts a child
whose events are relayed into this stream, ``await live_events_written()`` keeps the
stream in the order things happened.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from helix_dbos.durable.payloads import ToolOutcome
from helix_dbos.durable.runtime import current_runtime
from helix_dbos.events import Event, TextEvent, ToolCallEvent, ToolResultEvent, parse_event
from helix_dbos.orchestration import create_tool_result_message
from helix_dbos.store.records import KeyedEvent
from helix_dbos.types import FINISH_TOOL_NAME, AssistantMessage, ToolResultMessage

Part = tuple[str, Event]
"""An event and the part of its key that names it within the step (``call:t1``)."""

def keyed(run: int, step: int, parts: list[Part]) -> list[KeyedEvent]:
    """The events with their keys in the session (``<run>.<step>.<part>``)."""
    return [KeyedEvent.at(run, step, part, event) for part, event in parts]


def result_message(outcome: ToolOutcome) -> ToolResultMessage:
    return create_tool_result_message(
        outcome.tool_call_id, outcome.tool_name, result=outcome.result, success=outcome.success, error=outcome.error
    )


def assistant_events(message: AssistantMessage) -> list[Part]:
    """The model's ``text`` and ``tool_call`` events, with their key parts."""
    events: list[Part] = []
    if message.content:
        events.append(("text", TextEvent(content=message.content)))
    events.extend(
        (f"call:{call.id}", ToolCallEvent(tool_call_id=call.id, tool_name=call.name, input=call.arguments))
        for call in message.tool_calls
        if call.name != FINISH_TOOL_NAME
    )
    return events


def outcome_events(outcome: ToolOutcome) -> list[Part]:
    """What a finished tool streams: the custom events it emitted, then its result, with
    how long the tool ran when its step ran it."""
    custom: list[Part] = [
        (f"custom:{outcome.tool_call_id}:{i}", parse_event(row["type"], row["data"]))
        for i, row in enumerate(outcome.events)
    ]
    return custom + tool_result_events([result_message(outcome)], ms=outcome.ms if outcome.executed else None)


def tool_result_events(results: list[ToolResultMessage], ms: float | None = None) -> list[Part]:
    return [
        (
            f"result:{r.tool_call_id}",
            ToolResultEvent(
                tool_call_id=r.tool_call_id, tool_name=r.tool_name, content=r.content, is_error=r.is_error, ms=ms
            ),
        )
        for r in results
        if r.tool_name != FINISH_TOOL_NAME
    ]


@dataclass
class StepEvents:
    """The events of one step of one run that workflow code produces, in order."""

    session_id: str
    run: int
    step: int
    all: list[KeyedEvent] = field(default_factory=list)

    def add(self, parts: list[Part]) -> list[KeyedEvent]:
        """Record events for the commit; returns the new ones (a part already recorded is skipped)."""
        known = {e.key for e in self.all}
        new: list[KeyedEvent] = []
        for event in keyed(self.run, self.step, parts):
            if event.key not in known:
                known.add(event.key)
                new.append(event)
        self.all.extend(new)
        return new

    def publish(self, parts: list[Part]) -> None:
        """Record events and hand them to the writer, which puts them in the stream soon."""
        new = self.add(parts)
        if new:
            current_runtime().live_events.write(self.session_id, self.run, self.step, new)


FLUSH_TIMEOUT_SECONDS = 5.0
"""How long workflow code waits at most for published events to be written (after that,
the commit writes them, only later)."""


async def live_events_written() -> None:
    """Wait until the events published so far are in the stream."""
    await asyncio.to_thread(current_runtime().live_events.flush, FLUSH_TIMEOUT_SECONDS)
