"""Follow a session's durable event stream from any process, woken by LISTEN/NOTIFY, and,
on request, its token deltas as they are generated: :func:`follow_events` on a listening
connection of its own, and its async twin :func:`follow_events_async` on the process's
shared listener and pool (:class:`~helix_dbos._client.live.LiveStreams`), taking each
read the same way (:func:`take_page`).

Events are rows of ``helix.events``, written as they happen (a step's ``step_start``
before its model call, a tool's result when the tool ends: docs/architecture.md, "The
durable event stream"); the transaction that writes them sends ``NOTIFY helix_events,
'<session id>'`` (``helix.insert_events``, the stream's one writer). A reader
blocks on the notification and reads what is new, so it never busy-polls. Deltas are never
stored: the LLM step publishes each on the session's own channel
(``helix_dbos._store.delta_channels``), and a reader with ``deltas=True`` LISTENs there too and
yields them, in the order they were published, between the durable events::

    >>> for item in follow_events(url, "s1", pool=pool, deltas=True):       # doctest: +SKIP
    ...     if item.type == "delta":
    ...         print(item.text, end="")                  # no seq: never stored
    ...     else:
    ...         print(item.seq, item.type, item.data)
    >>> async for item in follow_events_async(live, "s1", deltas=True):     # doctest: +SKIP
    ...     print(item.type)

A reader that starts late sees only the deltas published after it started; the durable
``text`` and ``tool_call`` events still carry the whole message.
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import AsyncIterator, Generator, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import psycopg
from pydantic import ValidationError

from helix_dbos._database import libpq_url
from helix_dbos._deltas import DeltaRecord
from helix_dbos.events import RUN_END_EVENTS
from helix_dbos._store import reads
from helix_dbos._store.delta_channels import delta_channel, listen_statement
from helix_dbos._store.pools import Pool
from helix_dbos._client.notifications import WAKE, Subscription
from helix_dbos._store.records import EventRecord

if TYPE_CHECKING:
    from helix_dbos._client.live import LiveStreams

_SAFETY_WAKEUP_SECONDS = 5.0
_EVENTS_CHANNEL = "helix_events"
PAGE = 1000
"""How many events a follower reads at once."""
IDLE: Final = "idle"
"""Yielded by :func:`follow_events_async` after ``heartbeat`` seconds without news."""
CAUGHT_UP: Final = "caught-up"
"""Yielded by :func:`follow_events_async` (with ``marks``) when every committed event was
yielded and it starts waiting for more."""


@dataclass(frozen=True)
class Page:
    """One read of a session's stream as a follower takes it (the sync and the async
    follower alike)."""

    events: list[EventRecord]
    """What to yield: the read, cut after a run's end when the follower stops there."""
    last_seq: int
    """Where the next read starts after."""
    ended: bool
    """A run ended in it and the follower stops there: return once ``events`` are yielded."""
    more: bool
    """The read was full: read again before waiting for a notification."""


def take_page(batch: list[EventRecord], last_seq: int, until_run_end: bool) -> Page:
    """What a follower does with ``batch``, the events after ``last_seq``::

        >>> take_page([], 7, until_run_end=True)
        Page(events=[], last_seq=7, ended=False, more=False)
    """
    for index, event in enumerate(batch):
        if until_run_end and event.type in RUN_END_EVENTS:
            return Page(batch[: index + 1], event.seq, ended=True, more=False)
    return Page(batch, batch[-1].seq if batch else last_seq, ended=False, more=len(batch) == PAGE)


def follow_events(
    database_url: str,
    session_id: str,
    from_seq: int = 0,
    *,
    pool: Pool,
    follow: bool = True,
    until_run_end: bool = True,
    idle_timeout: float | None = None,
    deltas: bool = False,
) -> Iterator[EventRecord | DeltaRecord]:
    """Yield the session's events with ``seq >= from_seq`` in order, and with ``deltas``
    the token deltas published while following (:class:`DeltaRecord`, without ``seq``).

    With ``follow`` it waits for new ones; with ``until_run_end`` it returns after an
    event that ends a run (``finish``, ``error``, ``interrupted``, ``aborted``).
    ``idle_timeout`` returns after that many seconds without a new event or delta.
    """
    with psycopg.connect(libpq_url(database_url), autocommit=True) as listener:
        listener.execute(f"LISTEN {_EVENTS_CHANNEL}")
        if deltas:
            listener.execute(listen_statement(session_id))
        notes: deque[psycopg.Notify] = deque()
        last = from_seq - 1
        while True:
            with pool.connection() as conn:
                page = take_page(reads.events_after(conn, session_id, last, limit=PAGE), last, until_run_end)
            yield from page.events
            if page.ended:
                return
            last = page.last_seq
            if page.more:
                continue  # more were written already
            if not follow:
                return
            woken = yield from _deltas_until_new_events(listener, notes, session_id, idle_timeout)
            if not woken:
                return


async def follow_events_async(
    live: LiveStreams,
    session_id: str,
    from_seq: int = 0,
    *,
    deltas: bool = False,
    follow: bool = True,
    until_run_end: bool = True,
    heartbeat: float | None = None,
    idle_timeout: float | None = None,
    marks: bool = False,
    subscription: Subscription | None = None,
) -> AsyncIterator[EventRecord | DeltaRecord | str]:
    """The session's events with ``seq >= from_seq`` in order, and with ``deltas`` the
    deltas published while following, as :func:`follow_events` yields them, on ``live``'s
    shared listener and pool. With ``heartbeat`` it yields :data:`IDLE` after that many quiet
    seconds; ``idle_timeout`` returns after that many. With ``marks`` it yields
    :data:`CAUGHT_UP` each time it has yielded what is committed. A caller that
    subscribed already (to start a run only once it listens) passes its
    ``subscription`` (of the same session, with ``deltas``)."""
    subscribing = (
        live.notifications.subscribe(session_id, deltas) if subscription is None else contextlib.nullcontext(subscription)
    )
    async with subscribing as subscription:
        last = from_seq - 1
        quiet = heartbeat if heartbeat is not None else idle_timeout
        while True:
            page = take_page(await live.events_after(session_id, last), last, until_run_end)
            for event in page.events:
                yield event
            if page.ended:
                return
            last = page.last_seq
            if page.more:
                continue
            if not follow:
                return
            if marks:
                yield CAUGHT_UP
            while (item := await subscription.next(quiet)) is not WAKE:
                if item is None:
                    if heartbeat is None:
                        return
                    yield IDLE
                else:
                    yield item


def _deltas_until_new_events(
    listener: psycopg.Connection, notes: deque[psycopg.Notify], session_id: str, idle_timeout: float | None
) -> Generator[DeltaRecord, None, bool]:
    """Yield the deltas that arrive, in order, until the notification that new events of
    the session are committed (True: read them now) or ``idle_timeout`` passes (False).

    Notifications reach a listener in commit order, so the deltas an LLM step published
    before its commit are all yielded before the events of that commit are read.
    """
    channel = delta_channel(session_id)
    while True:
        if not notes and not _wait_for(listener, notes, session_id, idle_timeout):
            return False
        if not notes:
            return True  # the periodic wake-up: look at the table anyway
        note = notes.popleft()
        if note.channel == _EVENTS_CHANNEL:
            return True
        if note.channel == channel:
            try:
                yield DeltaRecord.from_payload(note.payload)
            except ValidationError:
                continue  # not ours: someone else notified on the channel


def _wait_for(
    listener: psycopg.Connection, notes: deque[psycopg.Notify], session_id: str, idle_timeout: float | None
) -> bool:
    """Block until a notification for the session (added to ``notes``) or a periodic
    wake-up (True), or until ``idle_timeout`` passes without one (False). Notes already
    waiting count at once; other sessions' event notifications are dropped."""
    if notes:
        return True
    deadline = None if idle_timeout is None else time.monotonic() + idle_timeout
    while True:
        wait = _SAFETY_WAKEUP_SECONDS
        if deadline is not None:
            wait = min(wait, deadline - time.monotonic())
            if wait <= 0:
                return False
        notes.extend(
            note for note in listener.notifies(timeout=wait, stop_after=1)
            if note.channel != _EVENTS_CHANNEL or note.payload == session_id
        )
        if notes or deadline is None:
            return True
