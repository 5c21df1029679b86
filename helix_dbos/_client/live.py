"""The async reading side of a process: follow sessions' streams without a thread each.

:class:`LiveStreams` owns, for one event loop, the process's one listening connection
(:class:`~helix_dbos._client.notifications.Notifications`) and a small pool of async
connections for the reads (``_store/reads.py``, its ``_async`` twins). Any number of readers share them;
a reader holds a pooled connection only while it reads::

    live = LiveStreams(url)
    async for item in live.follow("s1", deltas=True):
        print(item.type)                    # events in seq order, deltas between them
    await live.close()

A reader that starts late sees only the deltas published after it started; the durable
``text`` and ``tool_call`` events still carry the whole message.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final, TypeVar

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from helix_dbos._client.notifications import WAKE, Notifications, Subscription
from helix_dbos._client.streams import PAGE, take_page
from helix_dbos._database import libpq_url
from helix_dbos._deltas import DeltaRecord
from helix_dbos._store import reads
from helix_dbos._store.records import EventRecord, PendingToolCall, RunRecord, SessionRecord

IDLE: Final = "idle"
"""Yielded by :meth:`LiveStreams.follow` after ``heartbeat`` seconds without news."""
CAUGHT_UP: Final = "caught-up"
"""Yielded by :meth:`LiveStreams.follow` (with ``marks``) when every committed event was
yielded and it starts waiting for more."""

T = TypeVar("T")

_POOL_SIZE = 8


class LiveStreams:
    """Readers of sessions' streams in the running event loop, on ``database_url``."""

    def __init__(self, database_url: str, pool_size: int = _POOL_SIZE) -> None:
        self.notifications = Notifications(database_url)
        self._pool = AsyncConnectionPool(
            libpq_url(database_url), min_size=1, max_size=pool_size, open=False,
            kwargs={"autocommit": True}, name="helix-live",
        )
        self._opened = asyncio.Lock()
        self._open = False

    async def _connection(self) -> Any:
        if not self._open:
            async with self._opened:
                if not self._open:
                    await self._pool.open()
                    self._open = True
        return self._pool.connection()

    async def with_connection(self, work: Callable[[AsyncConnection[Any]], Awaitable[T]]) -> T:
        """``await work(conn)`` on a pooled connection (autocommit), for reads that go
        together or a transaction of its own::

            detail = await live.with_connection(lambda conn: commands.session_detail_async(conn, "s1"))
        """
        async with await self._connection() as conn:
            return await work(conn)

    async def events_after(self, session_id: str, after_seq: int, limit: int = PAGE) -> list[EventRecord]:
        async with await self._connection() as conn:
            return await reads.events_after_async(conn, session_id, after_seq, limit)

    async def session_row(self, session_id: str) -> SessionRecord | None:
        async with await self._connection() as conn:
            return await reads.get_session_row_async(conn, session_id)

    async def sessions(self, limit: int = 50, status: str | None = None, owner: str | None = None) -> list[SessionRecord]:
        """Most recently updated sessions first (rows only); with ``owner``, only that owner's."""
        async with await self._connection() as conn:
            return await reads.list_sessions_async(conn, limit, status, owner)

    async def runs_and_pending(self, session_id: str) -> tuple[list[RunRecord], list[PendingToolCall]]:
        """The session's runs (with their workflows' status) and its open pending calls."""
        async with await self._connection() as conn:
            return await reads.list_runs_async(conn, session_id), await reads.list_pending_async(conn, session_id)

    async def follow(
        self,
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
        deltas published while following, as :func:`helix_dbos._client.streams.follow_events`
        yields them. With ``heartbeat`` it yields :data:`IDLE` after that many quiet
        seconds; ``idle_timeout`` returns after that many. With ``marks`` it yields
        :data:`CAUGHT_UP` each time it has yielded what is committed. A caller that
        subscribed already (to start a run only once it listens) passes its
        ``subscription`` (of the same session, with ``deltas``)."""
        subscribing = (
            self.notifications.subscribe(session_id, deltas) if subscription is None else contextlib.nullcontext(subscription)
        )
        async with subscribing as subscription:
            last = from_seq - 1
            quiet = heartbeat if heartbeat is not None else idle_timeout
            while True:
                page = take_page(await self.events_after(session_id, last), last, until_run_end)
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

    async def close(self) -> None:
        await self.notifications.close()
        if self._open:
            await self._pool.close()
            self._open = False
