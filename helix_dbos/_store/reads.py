"""Reads of the ``helix`` schema. Every function takes a psycopg connection; its ``_async``
twin, where an async server needs one, takes a psycopg async connection and runs the same
statement with the same row mapping (``_store/statements.py``).

Messages, patches and snapshots are append-only, so "the transcript before message
``seq``" and "the state at step ``n``" never change once written. The workflow relies
on that: it reads them outside a DBOS step and still replays deterministically.

    >>> with pool.connection() as conn:                     # doctest: +SKIP
    ...     state = load_state(conn, "s1", at_step=3)
    >>> async with pool.connection() as conn:               # doctest: +SKIP
    ...     state = await load_state_async(conn, "s1")
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import jsonpatch
from psycopg import AsyncConnection, Connection

from helix_dbos._store import dbos_tables
from helix_dbos._store.statements import all_rows, all_rows_async, first_row, first_value, first_value_async
from helix_dbos._store.records import (
    AnswerRecord,
    EventRecord,
    PendingToolCall,
    RunRecord,
    SessionRecord,
    TranscriptEntry,
    UsageSummary,
)
from helix_dbos.types import Message, MessageAdapter

_SESSION_ROWS = (
    "SELECT s.id, s.agent_name, s.status, s.step_count, s.run_count, s.message_count, s.event_seq, s.output,"
    " s.error, s.stop_reason, s.interrupt_requested, p.id AS parent_session_id, s.parent_tool_call_id,"
    " r.id AS root_session_id, s.owner, s.created_at, s.updated_at"
    " FROM helix.sessions s JOIN helix.sessions r ON r.num = s.root_session_num"
    " LEFT JOIN helix.sessions p ON p.num = s.parent_session_num"
)
"""Session rows as :class:`SessionRecord` reads them: the parent's and the root's ids by
their numbers."""


def session_num(param: str = "id") -> str:
    """SQL for the number of the session whose id is parameter ``param`` (NULL when there
    is none), by which every helix table names a session."""
    return f"(SELECT num FROM helix.sessions WHERE id = %({param})s)"


_SESSION_NUM = f"session_num = {session_num()}"


SESSION_ROW = f"{_SESSION_ROWS} WHERE s.id = %(id)s"


def get_session_row(conn: Connection[Any], session_id: str) -> SessionRecord | None:
    """The session's row (no transcript or state), or None."""
    row = first_row(conn, SESSION_ROW, {"id": session_id})
    return SessionRecord.model_validate(row) if row else None


async def get_session_row_async(conn: AsyncConnection[Any], session_id: str) -> SessionRecord | None:
    """:func:`get_session_row` over an async connection."""
    rows = await all_rows_async(conn, SESSION_ROW, {"id": session_id})
    return SessionRecord.model_validate(rows[0]) if rows else None


def sessions_query(status: str | None, owner: str | None = None) -> str:
    """The statement of :func:`list_sessions` (parameters ``status``, ``owner`` and ``limit``)."""
    conditions = [c for c, given in (("s.status = %(status)s", status), ("s.owner = %(owner)s", owner)) if given is not None]
    where = f"WHERE {' AND '.join(conditions)}" if conditions else ""
    return f"{_SESSION_ROWS} {where} ORDER BY s.updated_at DESC LIMIT %(limit)s"


def list_sessions(
    conn: Connection[Any], limit: int = 50, status: str | None = None, owner: str | None = None
) -> list[SessionRecord]:
    """Most recently updated sessions first; with ``owner``, only that owner's."""
    rows = all_rows(conn, sessions_query(status, owner), {"status": status, "owner": owner, "limit": limit})
    return [SessionRecord.model_validate(r) for r in rows]


async def list_sessions_async(
    conn: AsyncConnection[Any], limit: int = 50, status: str | None = None, owner: str | None = None
) -> list[SessionRecord]:
    """:func:`list_sessions` over an async connection."""
    params = {"status": status, "owner": owner, "limit": limit}
    return [SessionRecord.model_validate(r) for r in await all_rows_async(conn, sessions_query(status, owner), params)]


DESCENDANT_SESSIONS = (
    "WITH RECURSIVE tree(num, path) AS ("
    "  SELECT num, ARRAY[created_at::text, id] FROM helix.sessions"
    f"  WHERE parent_session_num = {session_num()}"
    "  UNION ALL SELECT s.num, t.path || ARRAY[s.created_at::text, s.id]"
    "  FROM helix.sessions s JOIN tree t ON s.parent_session_num = t.num)"
    f" {_SESSION_ROWS} JOIN tree ON tree.num = s.num ORDER BY tree.path"
)
"""The statement of :func:`list_descendant_sessions` (parameter ``id``)."""


def list_descendant_sessions(conn: Connection[Any], session_id: str) -> list[SessionRecord]:
    """Every session started below ``session_id`` by sub-agent calls, depth first (each
    parent before its children, siblings in the order they were created)."""
    return [SessionRecord.model_validate(r) for r in all_rows(conn, DESCENDANT_SESSIONS, {"id": session_id})]


async def list_descendant_sessions_async(conn: AsyncConnection[Any], session_id: str) -> list[SessionRecord]:
    """:func:`list_descendant_sessions` over an async connection."""
    return [SessionRecord.model_validate(r) for r in await all_rows_async(conn, DESCENDANT_SESSIONS, {"id": session_id})]


ACTIVE_TREE = (
    "WITH RECURSIVE tree(num, id, depth) AS ("
    "  SELECT num, id, 0 FROM helix.sessions WHERE id = %(id)s"
    "  UNION ALL SELECT s.num, s.id, t.depth + 1 FROM helix.sessions s JOIN tree t ON s.parent_session_num = t.num)"
    " SELECT t.id FROM tree t JOIN helix.sessions s ON s.num = t.num"
    " WHERE s.status = ANY (helix.active_statuses()) ORDER BY t.depth, t.id"
)
"""The statement of :func:`active_tree` (parameter ``id``)."""


def active_tree(conn: Connection[Any], session_id: str) -> list[str]:
    """The session and its descendant sub-agent sessions that are running, parents first."""
    return [r["id"] for r in all_rows(conn, ACTIVE_TREE, {"id": session_id})]


async def active_tree_async(conn: AsyncConnection[Any], session_id: str) -> list[str]:
    """:func:`active_tree` over an async connection."""
    return [r["id"] for r in await all_rows_async(conn, ACTIVE_TREE, {"id": session_id})]


def load_messages(conn: Connection[Any], session_id: str, before_seq: int | None = None) -> list[Message]:
    """The transcript in order; only messages with ``seq < before_seq`` when given."""
    rows = all_rows(
        conn,
        f"SELECT message FROM helix.messages WHERE {_SESSION_NUM}"
        " AND (CAST(%(before)s AS integer) IS NULL OR seq < %(before)s) ORDER BY seq",
        {"id": session_id, "before": before_seq},
    )
    return [MessageAdapter.validate_python(r["message"]) for r in rows]


STATE_SNAPSHOT = (
    f"SELECT step, state FROM helix.state_snapshots WHERE {_SESSION_NUM}"
    " AND (CAST(%(at)s AS integer) IS NULL OR step <= %(at)s) ORDER BY step DESC LIMIT 1"
)
"""The latest state snapshot at or before step ``:at`` (NULL: the latest) of session ``:id``."""

STATE_PATCHES = (
    f"SELECT patch FROM helix.state_patches WHERE {_SESSION_NUM} AND step > %(from)s"
    " AND (CAST(%(at)s AS integer) IS NULL OR step <= %(at)s) ORDER BY step, part"
)
"""The state patches of session ``:id`` after step ``:from`` up to step ``:at`` (NULL: all), in order."""


def load_state(conn: Connection[Any], session_id: str, at_step: int | None = None) -> dict[str, Any]:
    """The custom state after step ``at_step`` (default: the latest), rebuilt from the
    latest snapshot at or before it and the patches after: each step's commit patch (part
    0), then what its post-commit hooks wrote (part 1)."""
    snap = first_row(conn, STATE_SNAPSHOT, {"id": session_id, "at": at_step})
    if snap is None:
        return {}
    patches = all_rows(conn, STATE_PATCHES, {"id": session_id, "from": snap["step"], "at": at_step})
    return replay_state(snap["state"], [r["patch"] for r in patches])


async def load_state_async(conn: AsyncConnection[Any], session_id: str, at_step: int | None = None) -> dict[str, Any]:
    """:func:`load_state` over an async connection."""
    snapshots = await all_rows_async(conn, STATE_SNAPSHOT, {"id": session_id, "at": at_step})
    if not snapshots:
        return {}
    [snap] = snapshots
    patches = await all_rows_async(conn, STATE_PATCHES, {"id": session_id, "from": snap["step"], "at": at_step})
    return replay_state(snap["state"], [r["patch"] for r in patches])


def replay_state(snapshot: dict[str, Any], patches: Iterable[Any]) -> dict[str, Any]:
    """``snapshot`` with ``patches`` (RFC 6902, rows of :data:`STATE_PATCHES`) applied in order.

    >>> replay_state({"n": 1}, [[{"op": "replace", "path": "/n", "value": 2}]])
    {'n': 2}
    """
    state = snapshot
    for patch in patches:
        state = jsonpatch.apply_patch(state, patch, in_place=True)
    return state


def list_runs(conn: Connection[Any], session_id: str) -> list[RunRecord]:
    """The session's runs, each with its DBOS workflow's status, executor and version."""
    rows = all_rows(conn, RUNS, {"id": session_id})
    workflows: list[dict[str, Any]] = []
    if rows and dbos_schema_exists(conn):
        workflows = all_rows(conn, dbos_tables.RUN_WORKFLOWS, {"ids": [r["workflow_id"] for r in rows]})
    return runs_with_workflows(rows, workflows)


async def list_runs_async(conn: AsyncConnection[Any], session_id: str) -> list[RunRecord]:
    """:func:`list_runs` over an async connection."""
    rows = await all_rows_async(conn, RUNS, {"id": session_id})
    workflows: list[dict[str, Any]] = []
    if rows and await dbos_schema_exists_async(conn):
        ids = [r["workflow_id"] for r in rows]
        workflows = await all_rows_async(conn, dbos_tables.RUN_WORKFLOWS, {"ids": ids})
    return runs_with_workflows(rows, workflows)


RUNS = (
    "SELECT CAST(%(id)s AS text) AS session_id, run, workflow_id, kind, status, start_step, end_step,"
    " start_seq, stop_reason, error, started_at, ended_at,"
    " COALESCE((SELECT jsonb_agg(jsonb_build_object('from_executor', a.from_executor, 'from_status', a.from_status,"
    "                                               'adopted_by', a.adopted_by, 'adopted_at', a.adopted_at)"
    "                            ORDER BY a.adopted_at)"
    "             FROM helix.run_adoptions a WHERE a.session_num = r.session_num AND a.run = r.run), '[]') AS adoptions"
    f" FROM helix.runs r WHERE {_SESSION_NUM} ORDER BY run"
)
"""The session's runs (parameter ``id``), without their workflows (:func:`runs_with_workflows`)."""


def runs_with_workflows(runs: list[dict[str, Any]], workflows: Iterable[Mapping[str, Any]]) -> list[RunRecord]:
    """``runs`` (rows of :data:`RUNS`), each with its DBOS workflow's status, executor and
    version from ``workflows`` (rows of ``dbos_tables.RUN_WORKFLOWS``) when it has one."""
    found = {w["workflow_id"]: w for w in workflows}
    return [RunRecord.model_validate({**found.get(r["workflow_id"], {}), **r}) for r in runs]


def run_workflow(conn: Connection[Any], session_id: str, run: int) -> str | None:
    """The DBOS workflow that holds run ``run`` of a session now: the run's own, or, once
    it parked, its waiter or its continuation; None for no such run."""
    found: str | None = first_value(
        conn, f"SELECT workflow_id FROM helix.runs WHERE {_SESSION_NUM} AND run = %(run)s", {"id": session_id, "run": run}
    )
    return found


def workflow_exists(conn: Connection[Any], workflow_id: str) -> bool:
    """Whether DBOS's system tables in this database know the workflow."""
    return dbos_schema_exists(conn) and bool(
        first_value(conn, f"SELECT {dbos_tables.WORKFLOW_EXISTS.format(workflow_id='%(w)s')}", {"w": workflow_id})
    )


_WITH_DBOS: set[str] = set()
"""The databases (connection strings) found to hold DBOS's system tables, which stay once made."""


def dbos_schema_exists(conn: Connection[Any]) -> bool:
    """Whether DBOS's system tables are in this database (DBOS was launched on it); read
    once per database where they are."""
    if conn.info.dsn in _WITH_DBOS:
        return True
    exists = bool(first_value(conn, dbos_tables.DBOS_SCHEMA_EXISTS))
    if exists:
        _WITH_DBOS.add(conn.info.dsn)
    return exists


async def dbos_schema_exists_async(conn: AsyncConnection[Any]) -> bool:
    """:func:`dbos_schema_exists` over an async connection."""
    return bool(await first_value_async(conn, dbos_tables.DBOS_SCHEMA_EXISTS))


TRANSCRIPT = f"SELECT seq, run, step, message FROM helix.messages WHERE {_SESSION_NUM} ORDER BY seq"
"""The statement of :func:`transcript` (parameter ``id``)."""


def transcript(conn: Connection[Any], session_id: str) -> list[TranscriptEntry]:
    """Every message of the session with its place in the logs."""
    return [TranscriptEntry.model_validate(r) for r in all_rows(conn, TRANSCRIPT, {"id": session_id})]


async def transcript_async(conn: AsyncConnection[Any], session_id: str) -> list[TranscriptEntry]:
    """:func:`transcript` over an async connection."""
    return [TranscriptEntry.model_validate(r) for r in await all_rows_async(conn, TRANSCRIPT, {"id": session_id})]


ANSWERS = (
    "SELECT CAST(%(id)s AS text) AS session_id, tool_call_id, kind, approved, reason, answered_by, answer,"
    f" answered_at FROM helix.tool_call_answers WHERE {_SESSION_NUM} ORDER BY answered_at, tool_call_id"
)
"""The statement of :func:`answers` (parameter ``id``)."""


def answers(conn: Connection[Any], session_id: str) -> list[AnswerRecord]:
    """The audit rows of the session's answered calls, oldest first."""
    return [AnswerRecord.model_validate(r) for r in all_rows(conn, ANSWERS, {"id": session_id})]


async def answers_async(conn: AsyncConnection[Any], session_id: str) -> list[AnswerRecord]:
    """:func:`answers` over an async connection."""
    return [AnswerRecord.model_validate(r) for r in await all_rows_async(conn, ANSWERS, {"id": session_id})]


FORKED_FROM = (
    f"SELECT data FROM helix.events WHERE {_SESSION_NUM} AND type = 'forked' ORDER BY seq LIMIT 1"
)
"""The data of the session's ``forked`` event (parameter ``id``); read by :func:`fork_origin`."""


def forked_from(conn: Connection[Any], session_id: str) -> dict[str, Any] | None:
    """``{"session_id", "step"}`` of the session a fork was made from, or None."""
    return fork_origin(first_value(conn, FORKED_FROM, {"id": session_id}))


async def forked_from_async(conn: AsyncConnection[Any], session_id: str) -> dict[str, Any] | None:
    """:func:`forked_from` over an async connection."""
    rows = await all_rows_async(conn, FORKED_FROM, {"id": session_id})
    return fork_origin(rows[0]["data"] if rows else None)


def fork_origin(forked: dict[str, Any] | None) -> dict[str, Any] | None:
    """``{"session_id", "step"}`` from a ``forked`` event's data (a row of :data:`FORKED_FROM`)."""
    return {"session_id": forked["source_session_id"], "step": forked["from_step"]} if forked else None


_PENDING_ROWS = (
    "SELECT s.id AS session_id, pc.tool_call_id, r.id AS root_session_id, pc.workflow_id, pc.run, pc.step,"
    " pc.tool_name, pc.kind, pc.input, pc.output_schema, pc.status, pc.requested_at, pc.deadline"
    " FROM helix.pending_tool_calls pc JOIN helix.sessions s ON s.num = pc.session_num"
    " JOIN helix.sessions r ON r.num = pc.root_session_num"
)
"""Pending calls as :class:`PendingToolCall` reads them: the session's and the root's ids by
their numbers."""


def list_pending(
    conn: Connection[Any], session_id: str | None = None, include_descendants: bool = True
) -> list[PendingToolCall]:
    """Open pending tool calls (waiting, and before their deadline): all, or of one
    session (and, by default, its sub-agents)."""
    rows = all_rows(conn, pending_query(session_id, include_descendants), {"id": session_id})
    return [PendingToolCall.model_validate(r) for r in rows]


async def list_pending_async(
    conn: AsyncConnection[Any], session_id: str | None = None, include_descendants: bool = True,
    owner: str | None = None,
) -> list[PendingToolCall]:
    """:func:`list_pending` over an async connection; with ``owner``, only the calls of
    that owner's sessions."""
    query = pending_query(session_id, include_descendants, owner)
    return [PendingToolCall.model_validate(r) for r in await all_rows_async(conn, query, {"id": session_id, "owner": owner})]


def pending_query(session_id: str | None, include_descendants: bool = True, owner: str | None = None) -> str:
    """The statement of :func:`list_pending` (parameters ``id`` and ``owner``): with
    ``owner``, only the calls of that owner's sessions."""
    where = "pc.status = 'pending' AND (pc.deadline IS NULL OR pc.deadline > now())"
    if owner is not None:
        where += " AND pc.root_session_num IN (SELECT num FROM helix.sessions WHERE owner = %(owner)s)"
    if session_id is not None and include_descendants:
        where += f" AND {session_num()} IN (pc.session_num, pc.root_session_num)"
    elif session_id is not None:
        where += f" AND pc.session_num = {session_num()}"
    return f"{_PENDING_ROWS} WHERE {where} ORDER BY pc.requested_at, pc.tool_call_id"


def get_pending_call(conn: Connection[Any], session_id: str, tool_call_id: str) -> PendingToolCall | None:
    row = first_row(
        conn, f"{_PENDING_ROWS} WHERE pc.session_num = {session_num('s')} AND pc.tool_call_id = %(t)s",
        {"s": session_id, "t": tool_call_id},
    )
    return PendingToolCall.model_validate(row) if row else None


def find_pending_under_root(conn: Connection[Any], root_session_id: str, tool_call_id: str) -> PendingToolCall | None:
    """The call ``tool_call_id`` of a sub-agent session under ``root_session_id`` (one at most)."""
    rows = all_rows(
        conn, f"{_PENDING_ROWS} WHERE pc.root_session_num = {session_num('r')} AND pc.tool_call_id = %(t)s",
        {"r": root_session_id, "t": tool_call_id},
    )
    return PendingToolCall.model_validate(rows[0]) if len(rows) == 1 else None


EVENTS_AFTER = (
    "SELECT CAST(%(id)s AS text) AS session_id, seq, run, step, type, data, created_at, key FROM helix.events"
    f" WHERE {_SESSION_NUM} AND seq > %(after)s ORDER BY seq LIMIT %(limit)s"
)
"""A range of the stream: read along ``events_pkey`` from ``:after``, never sorted."""


def events_after(conn: Connection[Any], session_id: str, after_seq: int, limit: int = 1000) -> list[EventRecord]:
    """Up to ``limit`` events of the session's stream after ``after_seq``, in order."""
    rows = all_rows(conn, EVENTS_AFTER, {"id": session_id, "after": after_seq, "limit": limit})
    return [EventRecord.model_validate(r) for r in rows]


async def events_after_async(
    conn: AsyncConnection[Any], session_id: str, after_seq: int, limit: int = 1000
) -> list[EventRecord]:
    """:func:`events_after` over an async connection."""
    rows = await all_rows_async(conn, EVENTS_AFTER, {"id": session_id, "after": after_seq, "limit": limit})
    return [EventRecord.model_validate(r) for r in rows]


USAGE_SUMMARY = (
    "SELECT source, name, count(*) AS calls, sum(input_tokens) AS i, sum(output_tokens) AS o,"
    " sum(total_tokens) AS t, sum(cost_usd) AS c, sum(ms) AS ms"
    " FROM helix.session_usage(%(id)s) GROUP BY source, name"
)
"""The statement of :func:`usage_summary` (parameter ``id``); summed by :func:`summed_usage`."""


def usage_summary(conn: Connection[Any], session_id: str) -> UsageSummary:
    """Usage of one session summed by source, and by tool or model name."""
    return summed_usage(all_rows(conn, USAGE_SUMMARY, {"id": session_id}))


async def usage_summary_async(conn: AsyncConnection[Any], session_id: str) -> UsageSummary:
    """:func:`usage_summary` over an async connection."""
    return summed_usage(await all_rows_async(conn, USAGE_SUMMARY, {"id": session_id}))


def summed_usage(rows: Iterable[Any]) -> UsageSummary:
    """The :class:`UsageSummary` of rows of :data:`USAGE_SUMMARY`."""
    summary = UsageSummary()
    for r in rows:
        _add_usage_row(summary, r)
    return summary


def _add_usage_row(summary: UsageSummary, r: Any) -> None:
    summary.by_name[f"{r['source']}:{r['name']}"] = {"calls": r["calls"], "ms": float(r["ms"] or 0)}
    if r["source"] == "llm":
        summary.llm_calls += r["calls"]
        summary.llm_ms += float(r["ms"] or 0)
        summary.input_tokens += int(r["i"] or 0)
        summary.output_tokens += int(r["o"] or 0)
        summary.total_tokens += int(r["t"] or 0)
        if r["c"] is not None:
            summary.cost_usd = (summary.cost_usd or 0.0) + float(r["c"])
    elif r["source"] == "tool":
        summary.tool_calls += r["calls"]
        summary.tool_ms += float(r["ms"] or 0)
    else:
        summary.client_tool_wait_ms += float(r["ms"] or 0)


def recorded_tool_outcome(
    conn: Connection[Any], session_id: str, step: int, tool_call_id: str, call_digest: str
) -> dict[str, Any] | None:
    """The recorded outcome of this exact call, or None."""
    outcome: dict[str, Any] | None = first_value(
        conn,
        "SELECT outcome FROM helix.tool_outcomes"
        f" WHERE session_num = {session_num('s')} AND step = %(n)s AND tool_call_id = %(c)s AND call_digest = %(d)s",
        {"s": session_id, "n": step, "c": tool_call_id, "d": call_digest},
    )
    return outcome


def stopped_runs(conn: Connection[Any], runs: list[tuple[str, int]]) -> dict[tuple[str, int], str]:
    """Which of these runs (session id, run number) should stop their running tools, and
    why: ``"abort"`` when the run is no longer in progress (aborted, cancelled, failed),
    ``"interrupt"`` when an interrupt was requested."""
    rows = all_rows(
        conn,
        "SELECT id, run_count, status = ANY (helix.active_statuses()) AS active, interrupt_requested"
        " FROM helix.sessions WHERE id = ANY (%(ids)s)",
        {"ids": sorted({session_id for session_id, _ in runs})},
    )
    found = {row["id"]: row for row in rows}
    stopped: dict[tuple[str, int], str] = {}
    for session_id, run in runs:
        row = found.get(session_id)
        if row is None or row["run_count"] != run or not row["active"]:
            stopped[(session_id, run)] = "abort"
        elif row["interrupt_requested"]:
            stopped[(session_id, run)] = "interrupt"
    return stopped
