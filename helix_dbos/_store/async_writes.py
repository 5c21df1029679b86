"""The writes an async server makes without a thread, over psycopg's async connections:
the statements of ``_store/writes.py``, compiled once for psycopg (as ``_store/async_reads.py``
does for reads). Each runs inside the caller's transaction::

    async with conn.transaction():
        asked = await request_interrupt(conn, "s1")
"""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection

from helix_dbos._store import writes
from helix_dbos._store.async_reads import psycopg_sql

_REQUEST_INTERRUPT = psycopg_sql(writes.REQUEST_INTERRUPT)


async def request_interrupt(conn: AsyncConnection[Any], session_id: str) -> bool:
    """Ask the session's running loop to stop after its current step. False if not running."""
    async with conn.cursor() as cur:
        await cur.execute(_REQUEST_INTERRUPT, {"id": session_id})
        return await cur.fetchone() is not None
