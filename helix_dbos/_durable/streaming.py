"""A step's durable events: how each reaches the stream exactly once.

Each event of a step gets a key unique in its session, ``<run>.<step>.<part>``, so writing
it twice writes it once. Workflow code publishes the events derived from a checkpoint as
soon as DBOS saved it: the model's ``text`` and ``tool_call`` events after the LLM step,
a tool's custom events and ``tool_result`` after its tool step. Publishing hands them to
the runtime's :class:`~helix_dbos._store.live_events.LiveEventWriter`, which writes them
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

A step's token deltas and its tools' live state take another path: they show the step
early and are never stored. The LLM step sends its deltas, tagged with session, run,
step and attempt, to the channels of the session and of the sessions above it
(``helix_dbos._store.delta_channels``)::

    sink = StepDeltas(runtime.deltas, session_id, run=1, step=3)
    result, usage = await generate_with_retry(..., on_delta=sink)
    await sink.flush()           # the deltas go out before the step's result is used

A tool's ``ctx.update_state`` is published the same way as a ``state`` delta with the
RFC 6902 operations it added (:class:`LiveState`), joined with the call's next updates
for a few milliseconds, and not at all when the tool returns sooner; the step's merged
``state_patch`` event stays what is durable.

``attempt`` is the time (microseconds since the epoch) when a model call attempt sent its
first delta: a retry within the step and a re-run after a crash both get a larger one, so
a consumer keeps, per ``(session_id, run, step)``, the deltas of the largest attempt it has seen.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypedDict

from helix_dbos._deltas import Delta, DeltaRecord
from helix_dbos._durable.payloads import ToolOutcome
from helix_dbos._durable.runtime import current_runtime
from helix_dbos.events import ErrorEvent, Event, FinishEvent, TextEvent, ToolCallEvent, ToolResultEvent, parse_event
from helix_dbos.state import StateTracker
from helix_dbos.state.rfc6902 import JsonPatchOperation
from helix_dbos._store.delta_channels import DeltaPublisher
from helix_dbos._store.records import KeyedEvent, Terminal
from helix_dbos.types import FINISH_TOOL_NAME, AssistantMessage, StepResult, ToolResultMessage, Usage

logger = logging.getLogger("helix_dbos.deltas")

Part = tuple[str, Event]
"""An event and the part of its key that names it within the step (``call:t1``)."""

def keyed(run: int, step: int, parts: list[Part]) -> list[KeyedEvent]:
    """The events with their keys in the session (``<run>.<step>.<part>``)."""
    return [KeyedEvent.at(run, step, part, event) for part, event in parts]


def result_message(outcome: ToolOutcome) -> ToolResultMessage:
    return outcome.message()


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
    how long the tool ran when its step ran it and the class of what it raised, if it did."""
    custom: list[Part] = [
        (f"custom:{outcome.tool_call_id}:{i}", parse_event(row["type"], row["data"]))
        for i, row in enumerate(outcome.events)
    ]
    ms = outcome.ms if outcome.executed else None
    return custom + tool_result_events([result_message(outcome)], ms=ms, error_type=outcome.error_type)


def tool_result_events(results: list[ToolResultMessage], ms: float | None = None,
                       error_type: str | None = None) -> list[Part]:
    return [
        (
            f"result:{r.tool_call_id}",
            ToolResultEvent(
                tool_call_id=r.tool_call_id, tool_name=r.tool_name, content=r.content, is_error=r.is_error, ms=ms,
                error_type=error_type,
            ),
        )
        for r in results
        if r.tool_name != FINISH_TOOL_NAME
    ]


def terminal_events(terminal: Terminal | None, usage: Usage) -> list[tuple[str, Event]]:
    """The event that ends the run, if the step ends it; ``finish`` carries the run's usage."""
    if terminal is None:
        return []
    if terminal.status == "completed":
        usage_json = usage.model_dump(mode="json")
        return [("end", FinishEvent(output=terminal.output, stop_reason=terminal.stop_reason, usage=usage_json))]
    return [("end", ErrorEvent(error=terminal.error, stop_reason=terminal.stop_reason))]


def step_usage(model: str, usage: Usage, step_result: StepResult) -> dict[str, Any]:
    """What the model used in a step, as its ``step_finish`` event says (``usage``): its
    tokens, cost and latency and its name; ``"success": false`` when the call failed. The
    usage ledger (``helix.session_usage``) reads the step's model row from it, its client
    tools' waits from ``usage.waits`` (the commit adds them) and a row for each tool call
    the step ran from its ``tool_result`` event::

        >>> from helix_dbos.types import TextStepResult
        >>> step_usage("openai/gpt-4o", Usage(input_tokens=9, total_tokens=9), TextStepResult(content="hi"))
        {'input_tokens': 9, 'output_tokens': 0, 'total_tokens': 9, 'cost_usd': None, 'latency_ms': 0.0, \
'model': 'openai/gpt-4o'}
    """
    used = {**usage.model_dump(mode="json"), "model": model}
    return used if step_result.type != "error" else {**used, "success": False}


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


EVENT_FLUSH_TIMEOUT_SECONDS = 5.0
"""How long workflow code waits at most for published events to be written (after that,
the commit writes them, only later)."""


async def live_events_written() -> None:
    """Wait until the events published so far are in the stream."""
    await asyncio.to_thread(current_runtime().live_events.flush, EVENT_FLUSH_TIMEOUT_SECONDS)


# --- token deltas and live state: best effort, never stored ---------------------------

DELTA_FLUSH_TIMEOUT_SECONDS = 5.0
"""How long the LLM step waits at most for its deltas to be sent (as long as it waits for
its events: a delta sent after the step's commit reaches no reader, which drops it)."""


class StepDeltas:
    """The ``on_delta`` callback of one LLM step (``generate_with_retry`` passes the attempt)."""

    def __init__(self, publisher: DeltaPublisher, session_id: str, run: int, step: int) -> None:
        self.publisher = publisher
        self.session_id = session_id
        self.run = run
        self.step = step
        self._attempts: dict[int, int] = {}
        self._next_index: dict[int, int] = {}

    def __call__(self, retry_attempt: int, delta: Delta) -> None:
        """Publish one delta; never raises (a delta is worth less than the model call)."""
        try:
            attempt = self._attempts.setdefault(retry_attempt, time.time_ns() // 1000)
            index = self._next_index.get(retry_attempt, 0)
            record = DeltaRecord(
                session_id=self.session_id, run=self.run, step=self.step, attempt=attempt, index=index,
                **delta.model_dump(),
            )
            self._next_index[retry_attempt] = index + self.publisher.publish(record)
        except Exception:
            logger.exception("could not publish a token delta (dropped)")

    async def flush(self) -> None:
        if self._attempts:
            await asyncio.to_thread(self.publisher.flush, DELTA_FLUSH_TIMEOUT_SECONDS)


class _ToolCallOrigin(TypedDict):
    """Which call of which step a running tool's state deltas come from."""

    session_id: str
    run: int
    step: int
    tool_call_id: str
    tool_name: str


class LiveState:
    """The state tracker a tool's context writes through: each ``update`` is applied to the
    tool's own tracker (what its step records) and its new RFC 6902 operations are
    published as a ``state`` delta of the call, best effort (held briefly and joined with
    the next ones, ``DeltaPublisher.publish_state``); ``done()`` drops what is still held
    when the tool returns. ``attempt`` is the time the tool step began, so a re-run of the
    call after a crash supersedes what the lost attempt showed."""

    def __init__(
        self, tracker: StateTracker, publisher: DeltaPublisher, session_id: str, run: int, step: int,
        tool_call_id: str, tool_name: str,
    ) -> None:
        self.tracker = tracker
        self._publisher = publisher
        self._record: _ToolCallOrigin = {
            "session_id": session_id, "run": run, "step": step, "tool_call_id": tool_call_id, "tool_name": tool_name,
        }
        self._attempt = time.time_ns() // 1000
        self._updates = 0

    def get_state(self) -> Any:
        return self.tracker.get_state()

    def update(self, fn: Callable[[Any], Any]) -> Any:
        before = self.tracker.get_rfc6902_patches()
        state = self.tracker.update(fn)
        added = _added(before, self.tracker.get_rfc6902_patches())
        if added:
            try:
                self._publisher.publish_state(self._delta([dict(op) for op in added]))
                self._updates += 1
            except Exception:
                logger.exception("could not publish a live state patch (dropped)")
        return state

    def done(self) -> None:
        """The tool returned: what it updated is in its outcome, and what is still held of
        its live state is not sent."""
        self._publisher.discard_state(self._delta([]))

    def _delta(self, patch: list[dict[str, Any]]) -> DeltaRecord:
        return DeltaRecord(kind="state", patch=patch, attempt=self._attempt, index=self._updates, **self._record)


def _added(before: list[JsonPatchOperation], after: list[JsonPatchOperation]) -> list[JsonPatchOperation]:
    """The operations of ``after`` that ``before`` did not have (each counted once), in order.

    >>> _added([{"op": "add", "path": "/n/-", "value": 1}],
    ...        [{"op": "add", "path": "/n/-", "value": 1}, {"op": "add", "path": "/n/-", "value": 1}])
    [{'op': 'add', 'path': '/n/-', 'value': 1}]
    """
    remaining = list(before)
    added: list[JsonPatchOperation] = []
    for op in after:
        if op in remaining:
            remaining.remove(op)
        else:
            added.append(op)
    return added
