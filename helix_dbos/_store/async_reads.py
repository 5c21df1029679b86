"""The reads an async server makes, over psycopg's async connections: the statements of
``_store/reads.py``, compiled once for psycopg, and the same pure code to make records of
their rows (a state replayed from its snapshot and patches, usage summed), so an async
server reads a session's stream, its state and its whole detail without a thread::

    async with pool.connection() as conn:
        batch = await events_after(conn, "s1", after_seq=41)
        state = await load_state(conn, "s1")
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from psycopg import AsyncConnection
from psycopg.rows import dict_row
from sqlalchemy.dialects.postgresql import psycopg as psycopg_dialect

from helix_dbos._store import dbos_tables, reads
from helix_dbos._store.records import (
    AnswerRecord, EventRecord, PendingToolCall, RunRecord, SessionRecord, TranscriptEntry, UsageSummary,
)

_DIALECT = psycopg_dialect.dialect()  # type: ignore[no-untyped-call]  # SQLAlchemy leaves its __init__ unannotated

def psycopg_sql(statement: sa.TextClause) -> str:
    """``statement`` with psycopg's ``%(name)s`` placeholders.

    >>> psycopg_sql(sa.text("SELECT 1 WHERE id = :id AND x LIKE 'a%'"))
    "SELECT 1 WHERE id = %(id)s AND x LIKE 'a%%'"
    """
    return str(statement.compile(dialect=_DIALECT))


_EVENTS_AFTER = psycopg_sql(reads.EVENTS_AFTER)
_SESSION_ROW = psycopg_sql(reads.SESSION_ROW)
_RUNS = psycopg_sql(reads.RUNS)
_RUN_WORKFLOWS = psycopg_sql(sa.text(dbos_tables.RUN_WORKFLOWS))
_DBOS_SCHEMA_EXISTS = psycopg_sql(sa.text(dbos_tables.DBOS_SCHEMA_EXISTS))
_TRANSCRIPT = psycopg_sql(reads.TRANSCRIPT)
_ANSWERS = psycopg_sql(reads.ANSWERS)
_USAGE_SUMMARY = psycopg_sql(reads.USAGE_SUMMARY)
_DESCENDANT_SESSIONS = psycopg_sql(reads.DESCENDANT_SESSIONS)
_FORKED_FROM = psycopg_sql(reads.FORKED_FROM)
_STATE_SNAPSHOT = psycopg_sql(reads.STATE_SNAPSHOT)
_STATE_PATCHES = psycopg_sql(reads.STATE_PATCHES)
_ACTIVE_TREE = psycopg_sql(reads.ACTIVE_TREE)


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


async def list_sessions(
    conn: AsyncConnection[Any], limit: int = 50, status: str | None = None, owner: str | None = None
) -> list[SessionRecord]:
    """Most recently updated sessions first (rows only); with ``owner``, only that owner's."""
    params = {"status": status, "owner": owner, "limit": limit}
    rows = await _rows(conn, psycopg_sql(reads.sessions_query(status, owner)), params)
    return [SessionRecord.model_validate(row) for row in rows]


async def list_pending(
    conn: AsyncConnection[Any], session_id: str | None = None, include_descendants: bool = True,
    owner: str | None = None,
) -> list[PendingToolCall]:
    """Open pending tool calls: all, or of one session (and, by default, its sub-agents);
    with ``owner``, only the calls of that owner's sessions."""
    query = psycopg_sql(reads.pending_query(session_id, include_descendants, owner))
    rows = await _rows(conn, query, {"id": session_id, "owner": owner})
    return [PendingToolCall.model_validate(row) for row in rows]


async def list_runs(conn: AsyncConnection[Any], session_id: str) -> list[RunRecord]:
    """The session's runs, each with its DBOS workflow's status, executor and version."""
    rows = await _rows(conn, _RUNS, {"id": session_id})
    ids = [row["workflow_id"] for row in rows]
    workflows = await _rows(conn, _RUN_WORKFLOWS, {"ids": ids}) if ids and await _dbos_schema_exists(conn) else []
    return reads.runs_with_workflows(rows, workflows)


async def _dbos_schema_exists(conn: AsyncConnection[Any]) -> bool:
    [row] = await _rows(conn, _DBOS_SCHEMA_EXISTS, {})
    return bool(next(iter(row.values())))


async def active_tree(conn: AsyncConnection[Any], session_id: str) -> list[str]:
    """The session and its descendant sub-agent sessions that are running, parents first."""
    return [row["id"] for row in await _rows(conn, _ACTIVE_TREE, {"id": session_id})]


async def load_state(conn: AsyncConnection[Any], session_id: str, at_step: int | None = None) -> dict[str, Any]:
    """The custom state after step ``at_step`` (default: the latest), as
    :func:`helix_dbos._store.reads.load_state` rebuilds it."""
    snapshots = await _rows(conn, _STATE_SNAPSHOT, {"id": session_id, "at": at_step})
    if not snapshots:
        return {}
    [snap] = snapshots
    patches = await _rows(conn, _STATE_PATCHES, {"id": session_id, "from": snap["step"], "at": at_step})
    return reads.replay_state(snap["state"], [row["patch"] for row in patches])


async def transcript(conn: AsyncConnection[Any], session_id: str) -> list[TranscriptEntry]:
    """Every message of the session with its place in the logs."""
    return [TranscriptEntry.model_validate(row) for row in await _rows(conn, _TRANSCRIPT, {"id": session_id})]


async def answers(conn: AsyncConnection[Any], session_id: str) -> list[AnswerRecord]:
    """The audit rows of the session's answered calls, oldest first."""
    return [AnswerRecord.model_validate(row) for row in await _rows(conn, _ANSWERS, {"id": session_id})]


async def usage_summary(conn: AsyncConnection[Any], session_id: str) -> UsageSummary:
    """Usage of one session summed by source, and by tool or model name."""
    return reads.summed_usage(await _rows(conn, _USAGE_SUMMARY, {"id": session_id}))


async def list_descendant_sessions(conn: AsyncConnection[Any], session_id: str) -> list[SessionRecord]:
    """Every session below ``session_id``, depth first, as :func:`helix_dbos._store.reads.list_descendant_sessions`."""
    return [SessionRecord.model_validate(row) for row in await _rows(conn, _DESCENDANT_SESSIONS, {"id": session_id})]


async def forked_from(conn: AsyncConnection[Any], session_id: str) -> dict[str, Any] | None:
    """``{"session_id", "step"}`` of the session a fork was made from, or None."""
    rows = await _rows(conn, _FORKED_FROM, {"id": session_id})
    return reads.fork_origin(rows[0]["data"] if rows else None)
