"""A step's durable events, written when they happen (store/sql/008).

Each event of a step gets a key unique in its session, ``<run>.<step>.<part>``. Workflow
code publishes an event as soon as what it reports is checkpointed (``step_start`` before
the LLM step, the model's ``text``/``tool_call`` after it, a tool's events after its
step), so a replay after a crash derives the same events under the same keys and writes
nothing. The runtime's :class:`~helix_dbos.store.live_events.LiveEventWriter` writes
them off the run's path; the commit gets every event of the step and writes those still
missing::

    events = StepEvents(session_id="s1", run=1, step=2)
    events.publish([("step_start", StepStartEvent(step=2))])         # in the stream soon
    events.add([("step_finish", StepFinishEvent(step=2))])           # written by the commit
    commit = StepCommit(..., events=events.all)

Before a transaction that writes unkeyed events (a suspension, a failed run) or starts a
child whose events are relayed into this stream, ``await live_events_written()`` keeps
the stream in the order things happened.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from helix_dbos.durable.runtime import current_runtime
from helix_dbos.events import Event
from helix_dbos.store.records import KeyedEvent

Part = tuple[str, Event]
"""An event and the part of its key that names it within the step (``call:t1``)."""


@dataclass
class StepEvents:
    """The events of one step of one run, in the order they were produced."""

    session_id: str
    run: int
    step: int
    all: list[KeyedEvent] = field(default_factory=list)

    def add(self, parts: list[Part]) -> list[KeyedEvent]:
        """Record events for the commit; returns the new ones (a part already recorded is skipped)."""
        known = {e.key for e in self.all}
        new = []
        for part, event in parts:
            key = f"{self.run}.{self.step}.{part}"
            if key not in known:
                known.add(key)
                new.append(KeyedEvent(key=key, event=event))
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
