"""Reads of the ``helix`` schema. Every function takes an open SQLAlchemy connection.

Messages, patches and snapshots are append-only, so "the transcript before message
``seq``" and "the state at step ``n``" never change once written. The workflow relies
on that: it reads them outside a DBOS step and still replays deterministically.

    >>> with engine.connect() as conn:                      # doctest: +SKIP
    ...     state = load_state(conn, "s1", at_step=3)
"""

from __future__ import annotations

from typing import Any

import jsonpatch
import sqlalchemy as sa

from helix_dbos.store.records import (
    AnswerRecord,
    EventRecord,
    PendingToolCall,
    RunRecord,
    SessionRecord,
    TranscriptEntry,
    UsageSummary,
    WorkflowPlacement,
)
from helix_dbos.types import Message, MessageAdapter

_SESSION_COLUMNS = (
    "id, agent_name, status, step_count, run_count, message_count, event_seq, output, error,"
    " stop_reason, interrupt_requested, parent_session_id, parent_tool_call_id, root_session_id,"
    " created_at, updated_at"
)


def session_num(param: str = "id") -> str:
    """SQL for the number of session ``:param``, by which the tables every step writes
    (``helix.events``, ``helix.messages``, ``helix.state_patches``) name their sessions."""
    return f"(SELECT num FROM helix.sessions WHERE id = :{param})"


_SESSION_NUM = f"session_num = {session_num()}"


SESSION_ROW = sa.text(f"SELECT {_SESSION_COLUMNS} FROM helix.sessions WHERE id = :id")


def get_session_row(conn: sa.Connection, session_id: str) -> SessionRecord | None:
    """The session's row (no transcript or state), or None."""
    row = conn.execute(SESSION_ROW, {"id": session_id}).mappings().first()
    return SessionRecord.model_validate(dict(row)) if row else None


def sessions_query(status: str | None) -> sa.TextClause:
    """The statement of :func:`list_sessions` (parameters ``status`` and ``limit``)."""
    where = "WHERE status = :status" if status else ""
    return sa.text(f"SELECT {_SESSION_COLUMNS} FROM helix.sessions {where} ORDER BY updated_at DESC LIMIT :limit")


def list_sessions(conn: sa.Connection, limit: int = 50, status: str | None = None) -> list[SessionRecord]:
    """Most recently updated sessions first."""
    rows = conn.execute(sessions_query(status), {"status": status, "limit": limit}).mappings()
    return [SessionRecord.model_validate(dict(r)) for r in rows]


def list_descendant_sessions(conn: sa.Connection, session_id: str) -> list[SessionRecord]:
    """Every session started below ``session_id`` by sub-agent calls, depth first (each
    parent before its children, siblings in the order they were created)."""
    cols = ", ".join(f"s.{c.strip()}" for c in _SESSION_COLUMNS.split(","))
    rows = conn.execute(
        sa.text(
            "WITH RECURSIVE tree(id, path) AS ("
            "  SELECT id, ARRAY[created_at::text, id] FROM helix.sessions WHERE parent_session_id = :id"
            "  UNION ALL SELECT s.id, t.path || ARRAY[s.created_at::text, s.id]"
            "  FROM helix.sessions s JOIN tree t ON s.parent_session_id = t.id)"
            f" SELECT {cols} FROM tree JOIN helix.sessions s ON s.id = tree.id ORDER BY tree.path"
        ),
        {"id": session_id},
    ).mappings()
    return [SessionRecord.model_validate(dict(r)) for r in rows]


def active_tree(conn: sa.Connection, session_id: str) -> list[str]:
    """The session and its descendant sub-agent sessions that are running, parents first."""
    rows = conn.execute(
        sa.text(
            "WITH RECURSIVE tree(id, depth) AS ("
            "  SELECT id, 0 FROM helix.sessions WHERE id = :id"
            "  UNION ALL SELECT s.id, t.depth + 1 FROM helix.sessions s JOIN tree t ON s.parent_session_id = t.id)"
            " SELECT t.id FROM tree t JOIN helix.sessions s ON s.id = t.id"
            " WHERE s.status IN ('active', 'awaiting_approval', 'awaiting_client_tool') ORDER BY t.depth, t.id"
        ),
        {"id": session_id},
    )
    return [r[0] for r in rows]


def load_messages(conn: sa.Connection, session_id: str, before_seq: int | None = None) -> list[Message]:
    """The transcript in order; only messages with ``seq < before_seq`` when given."""
    rows = conn.execute(
        sa.text(
            f"SELECT message FROM helix.messages WHERE {_SESSION_NUM}"
            " AND (CAST(:before AS integer) IS NULL OR seq < :before) ORDER BY seq"
        ),
        {"id": session_id, "before": before_seq},
    )
    return [MessageAdapter.validate_python(r[0]) for r in rows]


def load_messages_since_last_assistant(conn: sa.Connection, session_id: str) -> list[Message]:
    """The tail of the transcript from its last assistant message on (for the finish heal)."""
    rows = conn.execute(
        sa.text(
            f"SELECT message FROM helix.messages WHERE {_SESSION_NUM} AND seq >= COALESCE("
            f"(SELECT seq FROM helix.messages WHERE {_SESSION_NUM} AND message->>'role' = 'assistant'"
            " ORDER BY seq DESC LIMIT 1), 0) ORDER BY seq"
        ),
        {"id": session_id},
    )
    return [MessageAdapter.validate_python(r[0]) for r in rows]


def load_state(conn: sa.Connection, session_id: str, at_step: int | None = None) -> dict[str, Any]:
    """The custom state after step ``at_step`` (default: the latest), rebuilt from the
    latest snapshot at or before it and the patches after: each step's commit patch (part
    0), then what its post-commit hooks wrote (part 1)."""
    snap = conn.execute(
        sa.text(
            "SELECT step, state FROM helix.state_snapshots WHERE session_id = :id"
            " AND (CAST(:at AS integer) IS NULL OR step <= :at) ORDER BY step DESC LIMIT 1"
        ),
        {"id": session_id, "at": at_step},
    ).first()
    if snap is None:
        return {}
    state: dict[str, Any] = snap[1]
    patches = conn.execute(
        sa.text(
            f"SELECT patch FROM helix.state_patches WHERE {_SESSION_NUM} AND step > :from"
            " AND (CAST(:at AS integer) IS NULL OR step <= :at) ORDER BY step, part"
        ),
        {"id": session_id, "from": snap[0], "at": at_step},
    )
    for (patch,) in patches:
        state = jsonpatch.apply_patch(state, patch, in_place=True)
    return state


def list_runs(conn: sa.Connection, session_id: str) -> list[RunRecord]:
    """The session's runs, each with its DBOS workflow's status, executor and version."""
    rows = conn.execute(runs_query(dbos_schema_exists(conn)), {"id": session_id}).mappings()
    return [RunRecord.model_validate(dict(r)) for r in rows]


def runs_query(with_dbos: bool) -> sa.TextClause:
    """The statement of :func:`list_runs` (parameter ``id``); ``with_dbos``: joined with
    DBOS's tables, on a database that has them."""
    if not with_dbos:
        return sa.text("SELECT * FROM helix.runs WHERE session_id = :id ORDER BY run")
    return sa.text(
        "SELECT r.*, w.status AS workflow_status, w.executor_id, w.application_version, w.application_name,"
        " (SELECT version_name FROM dbos.application_versions v WHERE v.application_name = w.application_name"
        "   ORDER BY version_timestamp DESC LIMIT 1) AS latest_version"
        " FROM helix.runs r LEFT JOIN dbos.workflow_status w ON w.workflow_uuid = r.workflow_id"
        " WHERE r.session_id = :id ORDER BY r.run"
    )


def run_workflow(conn: sa.Connection, session_id: str, run: int) -> str | None:
    """The DBOS workflow that holds run ``run`` of a session now: the run's own, or, once
    it parked, its waiter or its continuation; None for no such run."""
    return conn.execute(
        sa.text("SELECT workflow_id FROM helix.runs WHERE session_id = :id AND run = :run"),
        {"id": session_id, "run": run},
    ).scalar_one_or_none()


def workflow_exists(conn: sa.Connection, workflow_id: str) -> bool:
    """Whether DBOS's system tables in this database know the workflow."""
    return dbos_schema_exists(conn) and conn.execute(
        sa.text("SELECT EXISTS (SELECT 1 FROM dbos.workflow_status WHERE workflow_uuid = :w)"), {"w": workflow_id}
    ).scalar_one()


def workflow_placement(conn: sa.Connection, workflow_id: str) -> WorkflowPlacement | None:
    """Where DBOS placed the workflow (its queue), or None when DBOS does not know it."""
    if not dbos_schema_exists(conn):
        return None
    row = conn.execute(
        sa.text("SELECT queue_name FROM dbos.workflow_status WHERE workflow_uuid = :w"), {"w": workflow_id}
    ).first()
    return None if row is None else WorkflowPlacement(queue=row.queue_name)


def dbos_schema_exists(conn: sa.Connection) -> bool:
    """Whether DBOS's system tables are in this database (DBOS was launched on it)."""
    return conn.execute(sa.text("SELECT to_regclass('dbos.workflow_status') IS NOT NULL")).scalar_one()


def transcript(conn: sa.Connection, session_id: str) -> list[TranscriptEntry]:
    """Every message of the session with its place in the logs."""
    rows = conn.execute(
        sa.text(f"SELECT seq, run, step, message FROM helix.messages WHERE {_SESSION_NUM} ORDER BY seq"),
        {"id": session_id},
    ).mappings()
    return [TranscriptEntry.model_validate(dict(r)) for r in rows]


def answers(conn: sa.Connection, session_id: str) -> list[AnswerRecord]:
    """The audit rows of the session's answered calls, oldest first."""
    rows = conn.execute(
        sa.text(
            "SELECT session_id, tool_call_id, kind, approved, reason, answered_by, answer, answered_at"
            " FROM helix.tool_call_answers WHERE session_id = :id ORDER BY answered_at, tool_call_id"
        ),
        {"id": session_id},
    ).mappings()
    return [AnswerRecord.model_validate(dict(r)) for r in rows]


def forked_from(conn: sa.Connection, session_id: str) -> dict[str, Any] | None:
    """``{"session_id", "step"}`` of the session a fork was made from, or None."""
    data = conn.execute(
        sa.text(f"SELECT data FROM helix.events WHERE {_SESSION_NUM} AND type = 'forked' ORDER BY seq LIMIT 1"),
        {"id": session_id},
    ).scalar()
    return {"session_id": data["source_session_id"], "step": data["from_step"]} if data else None


def list_pending(
    conn: sa.Connection, session_id: str | None = None, include_descendants: bool = True
) -> list[PendingToolCall]:
    """Open pending tool calls (waiting, and before their deadline): all, or of one
    session (and, by default, its sub-agents)."""
    rows = conn.execute(pending_query(session_id, include_descendants), {"id": session_id}).mappings()
    return [PendingToolCall.model_validate(dict(r)) for r in rows]


def pending_query(session_id: str | None, include_descendants: bool = True) -> sa.TextClause:
    """The statement of :func:`list_pending` (parameter ``id``)."""
    where = "status = 'pending' AND (deadline IS NULL OR deadline > now())"
    if session_id is not None and include_descendants:
        where += " AND (session_id = :id OR root_session_id = :id)"
    elif session_id is not None:
        where += " AND session_id = :id"
    return sa.text(f"SELECT * FROM helix.pending_tool_calls WHERE {where} ORDER BY requested_at, tool_call_id")


def get_pending_call(conn: sa.Connection, session_id: str, tool_call_id: str) -> PendingToolCall | None:
    row = conn.execute(
        sa.text("SELECT * FROM helix.pending_tool_calls WHERE session_id = :s AND tool_call_id = :t"),
        {"s": session_id, "t": tool_call_id},
    ).mappings().first()
    return PendingToolCall.model_validate(dict(row)) if row else None


def find_pending_under_root(conn: sa.Connection, root_session_id: str, tool_call_id: str) -> PendingToolCall | None:
    """The call ``tool_call_id`` of a sub-agent session under ``root_session_id`` (one at most)."""
    rows = conn.execute(
        sa.text("SELECT * FROM helix.pending_tool_calls WHERE root_session_id = :r AND tool_call_id = :t"),
        {"r": root_session_id, "t": tool_call_id},
    ).mappings().all()
    return PendingToolCall.model_validate(dict(rows[0])) if len(rows) == 1 else None


EVENTS_AFTER = sa.text(
    "SELECT CAST(:id AS text) AS session_id, seq, run, step, type, data, created_at, key FROM helix.events"
    f" WHERE {_SESSION_NUM} AND seq > :after ORDER BY seq LIMIT :limit"
)
"""A range of the stream: read along ``events_pkey`` from ``:after``, never sorted."""


def events_after(conn: sa.Connection, session_id: str, after_seq: int, limit: int = 1000) -> list[EventRecord]:
    """Up to ``limit`` events of the session's stream after ``after_seq``, in order."""
    rows = conn.execute(EVENTS_AFTER, {"id": session_id, "after": after_seq, "limit": limit}).mappings()
    return [EventRecord.model_validate(dict(r)) for r in rows]


def usage_summary(conn: sa.Connection, session_id: str) -> UsageSummary:
    """Usage of one session summed by source, and by tool or model name."""
    rows = conn.execute(
        sa.text(
            "SELECT source, name, count(*) AS calls, sum(input_tokens) AS i, sum(output_tokens) AS o,"
            " sum(total_tokens) AS t, sum(cost_usd) AS c, sum(ms) AS ms"
            " FROM helix.session_usage(:id) GROUP BY source, name"
        ),
        {"id": session_id},
    ).mappings()
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
    conn: sa.Connection, session_id: str, step: int, tool_call_id: str, call_digest: str
) -> dict[str, Any] | None:
    """The recorded outcome of this exact call, or None."""
    return conn.execute(
        sa.text(
            "SELECT outcome FROM helix.tool_outcomes"
            " WHERE session_id = :s AND step = :n AND tool_call_id = :c AND call_digest = :d"
        ),
        {"s": session_id, "n": step, "c": tool_call_id, "d": call_digest},
    ).scalar_one_or_none()


def stopped_runs(conn: sa.Connection, runs: list[tuple[str, int]]) -> dict[tuple[str, int], str]:
    """Which of these runs (session id, run number) should stop their running tools, and
    why: ``"abort"`` when the run is no longer in progress (aborted, cancelled, failed),
    ``"interrupt"`` when an interrupt was requested."""
    rows = conn.execute(
        sa.text(
            "SELECT id, run_count, status = ANY (helix.active_statuses()) AS active, interrupt_requested"
            " FROM helix.sessions WHERE id = ANY (:ids)"
        ),
        {"ids": sorted({session_id for session_id, _ in runs})},
    ).mappings()
    found = {row["id"]: row for row in rows}
    stopped: dict[tuple[str, int], str] = {}
    for session_id, run in runs:
        row = found.get(session_id)
        if row is None or row["run_count"] != run or not row["active"]:
            stopped[(session_id, run)] = "abort"
        elif row["interrupt_requested"]:
            stopped[(session_id, run)] = "interrupt"
    return stopped
