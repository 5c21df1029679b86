"""A step's durable events, written when they happen (store/sql/008).

Each event of a step gets a key unique in its session, ``<run>.<step>.<part>``. Workflow
code writes an event as soon as what it reports is checkpointed (``step_start`` before
the LLM step, the model's ``text``/``tool_call`` after it, a tool's events after its
step), so a replay after a crash derives the same events under the same keys and writes
nothing. The commit gets every event of the step and writes those still missing::

    events = StepEvents(session_id="s1", run=1, step=2)
    await events.publish([("step_start", StepStartEvent(step=2))])   # in the stream now
    events.add([("step_finish", StepFinishEvent(step=2))])           # written by the commit
    commit = StepCommit(..., events=events.all)
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

    async def publish(self, parts: list[Part]) -> None:
        """Record events and put them in the stream now."""
        new = self.add(parts)
        if new:
            await asyncio.to_thread(current_runtime().append_live_events, self.session_id, self.run, self.step, new)
