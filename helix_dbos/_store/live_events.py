"""Writing a step's keyed events to the durable stream as they happen, off the run's path.

Workflow code hands each group of keyed events to a
:class:`LiveEventWriter` and goes on at once; one daemon thread per process
(``_store/sender.py``) writes them, in the order handed over, with
``helix.append_events_once`` on an autocommit connection of its own, merging what queued
up for the same step into one statement. Keys make this
safe to do late or not at all: the step's commit writes every event of the step that is
not in the stream yet, and a write that comes after it writes nothing. A write that fails
(no free connection, a connection fault) is tried again for up to five seconds, so what
was handed over still reaches the stream in order, then dropped and left to the commit::

    writer = LiveEventWriter(url)
    writer.write("s1", run=1, step=2, events=[keyed])   # returns at once
    writer.flush(timeout=5.0)                            # wait until what was handed over is written

Workflow code flushes before a transaction that writes unkeyed events of the same step
(a suspension's ``approval_request``, a failed run's ``error``) or starts a child whose
events are relayed into the stream, so the stream keeps the order things happened in.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import psycopg

from helix_dbos._store.engine import to_json
from helix_dbos._store.records import KeyedEvent
from helix_dbos._store.sender import Sender
from helix_dbos._text import storable

logger = logging.getLogger("helix_dbos.events")

_APPEND_ONCE = "SELECT helix.append_events_once(%s, %s, %s, %s::jsonb)"


@dataclass(frozen=True)
class _Group:
    """Keyed events of one step to write."""

    session_id: str
    run: int
    step: int
    events: list[KeyedEvent]

    def same_step(self, other: _Group) -> bool:
        return (self.session_id, self.run, self.step) == (other.session_id, other.run, other.step)


class LiveEventWriter(Sender[_Group]):
    """Writes keyed step events in the order handed over, from one daemon thread."""

    retry_seconds = 5.0

    def __init__(self, database_url: str) -> None:
        super().__init__(database_url, name="helix-live-events")

    def write(self, session_id: str, run: int, step: int, events: list[KeyedEvent]) -> None:
        """Hand events over to be written soon; returns at once."""
        self.put(_Group(session_id, run, step, list(events)))

    def send(self, conn: psycopg.Connection, items: list[_Group]) -> None:
        for group in merged(items):
            rows = storable([e.to_row() for e in group.events])
            conn.execute(_APPEND_ONCE, (group.session_id, group.run, group.step, to_json(rows)))

    def dropped(self, items: list[_Group], error: psycopg.Error) -> None:
        logger.info("live events of %d steps left to their commits: %s", len(items), error)


def merged(groups: list[_Group]) -> list[_Group]:
    """Consecutive groups of the same step as one."""
    out: list[_Group] = []
    for group in groups:
        if out and out[-1].same_step(group):
            out[-1] = _Group(group.session_id, group.run, group.step, [*out[-1].events, *group.events])
        else:
            out.append(group)
    return out
