"""Writing a step's keyed events to the durable stream as they happen, off the run's path.

Workflow code hands each group of keyed events (``store/sql/008``) to a
:class:`LiveEventWriter` and goes on at once; one daemon thread per process writes them,
in the order handed over, with ``helix.append_events_once`` on an autocommit connection of
its own, merging what queued up for the same step into one statement. Keys make this
safe to do late or not at all: the step's commit writes every event of the step that is
not in the stream yet, and a write that comes after it writes nothing. A write that fails
(a connection fault) is dropped and left to the commit::

    writer = LiveEventWriter(url)
    writer.write("s1", run=1, step=2, events=[keyed])   # returns at once
    writer.flush(timeout=5.0)                            # wait until what was handed over is written

Workflow code flushes before a transaction that writes unkeyed events of the same step
(a suspension's ``approval_request``, a failed run's ``error``) or starts a child whose
events are relayed into the stream, so the stream keeps the order things happened in.
"""

from __future__ import annotations

import logging
import queue
import threading
from dataclasses import dataclass, field

import psycopg

from helix_dbos.database import libpq_url
from helix_dbos.store.engine import to_json
from helix_dbos.store.records import KeyedEvent
from helix_dbos.text import storable

logger = logging.getLogger("helix_dbos.events")

_APPEND_ONCE = "SELECT helix.append_events_once(%s, %s, %s, %s::jsonb)"


@dataclass(frozen=True)
class _Group:
    """Keyed events of one step to write, or (with ``done``) a marker set when all before
    it were written."""

    session_id: str = ""
    run: int = 0
    step: int = 0
    events: list[KeyedEvent] = field(default_factory=list)
    done: threading.Event | None = None

    def same_step(self, other: _Group) -> bool:
        return (self.session_id, self.run, self.step) == (other.session_id, other.run, other.step)


class LiveEventWriter:
    """Writes keyed step events in the order handed over, from one daemon thread."""

    def __init__(self, database_url: str) -> None:
        self._url = libpq_url(database_url)
        self._queue: queue.Queue[_Group] = queue.Queue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def write(self, session_id: str, run: int, step: int, events: list[KeyedEvent]) -> None:
        """Hand events over to be written soon; returns at once."""
        self._queue.put(_Group(session_id, run, step, list(events)))
        self._start()

    def flush(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds until everything handed over is written (or
        dropped); True if it was."""
        done = threading.Event()
        self._queue.put(_Group(done=done))
        self._start()
        return done.wait(timeout)

    def _start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._write_forever, name="helix-live-events", daemon=True)
                self._thread.start()

    def _write_forever(self) -> None:
        conn: psycopg.Connection | None = None
        while True:
            for group in self._merged(self._take_all()):
                if group.done is not None:
                    group.done.set()
                    continue
                try:
                    if conn is None or conn.closed:
                        conn = psycopg.connect(self._url, autocommit=True, connect_timeout=5)
                    rows = storable([e.to_row() for e in group.events])
                    conn.execute(_APPEND_ONCE, (group.session_id, group.run, group.step, to_json(rows)))
                except psycopg.Error as error:
                    logger.info("live events of %s step %s left to the step's commit: %s",
                                group.session_id, group.step, error)
                    conn = None

    def _take_all(self) -> list[_Group]:
        """The next group (waiting for one) and every group queued behind it."""
        taken = [self._queue.get()]
        while True:
            try:
                taken.append(self._queue.get_nowait())
            except queue.Empty:
                return taken

    @staticmethod
    def _merged(groups: list[_Group]) -> list[_Group]:
        """Consecutive groups of the same step as one (markers stay where they are)."""
        merged: list[_Group] = []
        for group in groups:
            last = merged[-1] if merged else None
            if last is not None and group.done is None and last.done is None and last.same_step(group):
                merged[-1] = _Group(last.session_id, last.run, last.step, [*last.events, *group.events])
            else:
                merged.append(group)
        return merged
