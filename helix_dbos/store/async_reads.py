"""The reads a live stream makes, over psycopg's async connections: the statements of
``store/reads.py``, compiled once for psycopg, so an async server reads the session's
stream without a thread::

    async with pool.connection() as conn:
        batch = await events_after(conn, "s1", after_seq=41)
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from psycopg import AsyncConnection
from psycopg.rows import dict_row
from sqlalchemy.dialects.postgresql import psycopg as psycopg_dialect

from helix_dbos.store import dbos_tables
from helix_dbos.store.reads import EVENTS_AFTER, RUNS, SESSION_ROW, pending_query, runs_with_workflows, sessions_query
from helix_dbos.store.records import EventRecord, PendingToolCall, RunRecord, SessionRecord

_DIALECT = psycopg_dialect.dialect()

def psycopg_sql(statement: sa.TextClause) -> str:
    """``statement`` with psycopg's ``%(name)s`` placeholders.

    >>> psycopg_sql(sa.text("SELECT 1 WHERE id = :id AND x LIKE 'a%'"))
    "SELECT 1 WHERE id = %(id)s AND x LIKE 'a%%'"
    """
    return str(statement.compile(dialect=_DIALECT))


_EVENTS_AFTER = psycopg_sql(EVENTS_AFTER)
_SESSION_ROW = psycopg_sql(SESSION_ROW)
_RUNS = psycopg_sql(RUNS)
_RUN_WORKFLOWS = psycopg_sql(sa.text(dbos_tables.RUN_WORKFLOWS))


async def _rows(conn: AsyncConnection[Any], sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(sql, params)
        return await cur.fetchall()


async def events_after(conn: AsyncConnection[Any], session_id: str, after_seq: int, limit: int = 1000) -> list[EventRecord]:
    """Up to ``limit`` events of the session's stream after ``after_seq``, in order."""
    rows = await _rows(conn, _EVENTS_AFTER, {"id": session_id, "after": after_seq, "limit": limit})
    return [EventRecord.model_validate(row) for row in rows]


async def get_session_row(conn: AsyncConnection[Any], session_id: str) -> SessionRecord | None:
    """The session's row (no transcript or state), or None."""
    rows = await _rows(conn, _SESSION_ROW, {"id": session_id})
    return SessionRecord.model_validate(rows[0]) if rows else None


async def list_sessions(conn: AsyncConnection[Any], limit: int = 50, status: str | None = None) -> list[SessionRecord]:
    """Most recently updated sessions first (rows only)."""
    rows = await _rows(conn, psycopg_sql(sessions_query(status)), {"status": status, "limit": limit})
    return [SessionRecord.model_validate(row) for row in rows]


async def list_pending(conn: AsyncConnection[Any], session_id: str | None = None) -> list[PendingToolCall]:
    """Open pending tool calls: all, or of one session and its sub-agents."""
    rows = await _rows(conn, psycopg_sql(pending_query(session_id)), {"id": session_id})
    return [PendingToolCall.model_validate(row) for row in rows]


async def list_runs(conn: AsyncConnection[Any], session_id: str) -> list[RunRecord]:
    """The session's runs with their DBOS workflows' status, on a database with DBOS's schema
    (a process that launched DBOS)."""
    rows = await _rows(conn, _RUNS, {"id": session_id})
    ids = [row["workflow_id"] for row in rows]
    workflows = await _rows(conn, _RUN_WORKFLOWS, {"ids": ids}) if ids else []
    return runs_with_workflows(rows, workflows)
