"""The async reading side of a process: its connections for reads and for following
sessions' streams without a thread each.

:class:`LiveStreams` owns, for one event loop, the process's one listening connection
(:class:`~helix_dbos._client.notifications.Notifications`) and a small pool of async
connections for the reads (``_store/reads.py``, its ``_async`` twins). Any number of
readers share them; a reader holds a pooled connection only while it reads, and a
follower (:func:`~helix_dbos._client.streams.follow_events_async`) waits on the shared
listener::

    live = LiveStreams(url)
    row = await live.session_row("s1")
    async for item in follow_events_async(live, "s1", deltas=True):
        print(item.type)                    # events in seq order, deltas between them
    await live.close()
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from helix_dbos._client.notifications import Notifications
from helix_dbos._client.streams import PAGE
from helix_dbos._database import libpq_url
from helix_dbos._store import reads
from helix_dbos._store.records import EventRecord, PendingToolCall, RunRecord, SessionRecord

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

    async def close(self) -> None:
        await self.notifications.close()
        if self._open:
            await self._pool.close()
            self._open = False
