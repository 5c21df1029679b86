"""Writing a step's keyed events to the durable stream as they happen, off the run's path.

Workflow code hands each group of keyed events to a
:class:`LiveEventWriter` and goes on at once; one daemon thread per process
(``_store/sender.py``) writes them, in the order handed over, with
``helix.append_events_once`` on an autocommit connection of its own. A step's events wait
:data:`LIVE_EVENT_DELAY` seconds after the first of them is handed over, and go as one
statement with what the step handed over meanwhile; a step that commits sooner (its
tools were quick) drops them unsent (``committing``), as its commit writes them. So
another process sees the model's tool calls and each finished tool's result within tens
of milliseconds while the step's tools still run, and a quick step costs no write of its
own. Keys make this safe to do late or twice: the commit writes every event of the step
that is not in the stream yet, and a write that comes after it writes nothing. A write
that fails (no free connection, a connection fault) is tried again for up to five
seconds, so what was handed over still reaches the stream in order, then dropped and
left to the commit::

    writer = LiveEventWriter(url)
    writer.write("s1", run=1, step=2, events=[keyed])   # returns at once
    writer.flush(timeout=5.0)                            # write what was handed over now, and wait
    writer.committing("s1", run=1, step=2)               # the commit writes the rest;
                                                         # True if some were written

Workflow code flushes before a transaction that writes unkeyed events of the same step
(a suspension's ``approval_request``, a failed run's ``error``) or starts a child whose
events are relayed into the stream, so the stream keeps the order things happened in.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import psycopg

from helix_dbos._store.statements import to_json
from helix_dbos._store.records import KeyedEvent
from helix_dbos._store.sender import Sender
from helix_dbos._text import storable

logger = logging.getLogger("helix_dbos.events")

_APPEND_ONCE = "SELECT helix.append_events_once(%s, %s, %s, %s::jsonb)"

LIVE_EVENT_DELAY = 0.025
"""Seconds a step's events wait for its commit before they are written on their own."""


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
        self.hold((session_id, run, step), _Group(session_id, run, step, list(events)), LIVE_EVENT_DELAY)

    def committing(self, session_id: str, run: int, step: int) -> bool:
        """The step is about to commit: what it handed over and is not written yet is left
        to the commit. True when some of its events were taken to be written (they may be
        in the stream already, so its commit must look their keys up)."""
        return self.discard((session_id, run, step))

    def merge(self, held: _Group, item: _Group) -> _Group:
        return _Group(held.session_id, held.run, held.step, [*held.events, *item.events])

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
