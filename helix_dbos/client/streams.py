"""Follow a session's durable event stream from any process, woken by LISTEN/NOTIFY.

Events are rows of ``helix.events``, written as they happen (a step's ``step_start``
before its model call, a tool's result when the tool ends: docs/architecture.md, "The
durable event stream"); a trigger sends ``NOTIFY helix_events, '<session id>'``. A reader blocks on the notification and
reads what is new, so it never busy-polls::

    >>> for event in follow_events(url, "s1"):               # doctest: +SKIP
    ...     print(event.seq, event.type, event.data)
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import psycopg
import sqlalchemy as sa

from helix_dbos.database import libpq_url
from helix_dbos.events import RUN_END_EVENTS
from helix_dbos.store import reads
from helix_dbos.store.records import EventRecord

_SAFETY_WAKEUP_SECONDS = 5.0


def follow_events(
    database_url: str,
    session_id: str,
    from_seq: int = 0,
    *,
    engine: sa.Engine,
    follow: bool = True,
    until_run_end: bool = True,
    idle_timeout: float | None = None,
) -> Iterator[EventRecord]:
    """Yield the session's events with ``seq >= from_seq`` in order.

    With ``follow`` it waits for new ones; with ``until_run_end`` it returns after an
    event that ends a run (``finish``, ``error``, ``interrupted``, ``aborted``).
    ``idle_timeout`` returns after that many seconds without a new event.
    """
    with psycopg.connect(libpq_url(database_url), autocommit=True) as listener:
        listener.execute("LISTEN helix_events")
        last = from_seq - 1
        while True:
            with engine.connect() as conn:
                batch = reads.events_after(conn, session_id, last)
            for event in batch:
                last = event.seq
                yield event
                if until_run_end and event.type in RUN_END_EVENTS:
                    return
            if batch:
                continue
            if not follow or not _wait_for(listener, session_id, idle_timeout):
                return


def _wait_for(listener: psycopg.Connection, session_id: str, idle_timeout: float | None) -> bool:
    """Block until a notification for the session or a periodic wake-up (True), or until
    ``idle_timeout`` passes without one (False)."""
    deadline = None if idle_timeout is None else time.monotonic() + idle_timeout
    while True:
        wait = _SAFETY_WAKEUP_SECONDS
        if deadline is not None:
            wait = min(wait, deadline - time.monotonic())
            if wait <= 0:
                return False
        woke = False
        for note in listener.notifies(timeout=wait, stop_after=1):
            woke = note.payload == session_id
        if woke or deadline is None:
            return True
