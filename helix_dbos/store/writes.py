"""Writes to the ``helix`` schema. Each function runs inside the caller's transaction.

The runtime calls these inside DBOS datasource transactions, so each write commits
atomically with the checkpoint of the workflow step that made it.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from helix_dbos.store.engine import to_json
from helix_dbos.types import Message

ACTIVE_STATUSES = ("active", "awaiting_approval", "awaiting_client_tool")
"""Statuses in which a session has a run in progress."""


def lock_session(conn: sa.Connection, session_id: str) -> dict[str, Any] | None:
    """Select the session row FOR UPDATE (None when absent)."""
    row = conn.execute(
        sa.text(
            "SELECT id, agent_name, status, step_count, run_count, message_count, event_seq"
            " FROM helix.sessions WHERE id = :id FOR UPDATE"
        ),
        {"id": session_id},
    ).mappings().first()
    return dict(row) if row else None


def insert_session(
    conn: sa.Connection,
    *,
    session_id: str,
    agent_name: str,
    initial_state: dict[str, Any],
    root_session_id: str,
    parent_session_id: str | None = None,
    parent_tool_call_id: str | None = None,
) -> None:
    """Create an active session with its step-0 state snapshot."""
    conn.execute(
        sa.text(
            "INSERT INTO helix.sessions (id, agent_name, root_session_id, parent_session_id, parent_tool_call_id)"
            " VALUES (:id, :agent, :root, :parent, :ptc)"
        ),
        {
            "id": session_id,
            "agent": agent_name,
            "root": root_session_id,
            "parent": parent_session_id,
            "ptc": parent_tool_call_id,
        },
    )
    conn.execute(
        sa.text("INSERT INTO helix.state_snapshots (session_id, step, state) VALUES (:id, 0, CAST(:s AS jsonb))"),
        {"id": session_id, "s": to_json(initial_state)},
    )


def reopen_session(conn: sa.Connection, session_id: str, run: int) -> None:
    """Mark the session active for run ``run`` (the caller holds the row lock)."""
    conn.execute(
        sa.text(
            "UPDATE helix.sessions SET status = 'active', run_count = :run, error = NULL, stop_reason = NULL,"
            " interrupt_requested = false, version = version + 1, updated_at = now() WHERE id = :id"
        ),
        {"id": session_id, "run": run},
    )


def append_messages(conn: sa.Connection, session_id: str, run: int, step: int, messages: list[Message]) -> int:
    """Append messages at the end of the transcript; return the new message count."""
    payload = to_json([m.model_dump(mode="json", exclude_none=True) for m in messages])
    return int(
        conn.execute(
            sa.text(
                "WITH s AS (UPDATE helix.sessions SET message_count = message_count + jsonb_array_length(CAST(:m AS jsonb))"
                "  WHERE id = :id RETURNING message_count),"
                " ins AS (INSERT INTO helix.messages (session_id, seq, run, step, message)"
                "  SELECT :id, (SELECT message_count FROM s) - jsonb_array_length(CAST(:m AS jsonb)) + t.ord - 1,"
                "   :run, :step, t.msg FROM jsonb_array_elements(CAST(:m AS jsonb)) WITH ORDINALITY AS t(msg, ord))"
                " SELECT message_count FROM s"
            ),
            {"id": session_id, "m": payload, "run": run, "step": step},
        ).scalar_one()
    )


def insert_run(
    conn: sa.Connection, *, session_id: str, run: int, workflow_id: str, kind: str, start_step: int, start_seq: int
) -> None:
    conn.execute(
        sa.text(
            "INSERT INTO helix.runs (session_id, run, workflow_id, kind, start_step, start_seq)"
            " VALUES (:id, :run, :wf, :kind, :step, :seq)"
        ),
        {"id": session_id, "run": run, "wf": workflow_id, "kind": kind, "step": start_step, "seq": start_seq},
    )


def append_events(conn: sa.Connection, session_id: str, run: int, step: int, events: list[dict[str, Any]]) -> int:
    """Append ``[{type, data}]`` to the session's stream; return the last seq."""
    return int(
        conn.execute(
            sa.text("SELECT helix.append_events(:id, :run, :step, CAST(:e AS jsonb))"),
            {"id": session_id, "run": run, "step": step, "e": to_json(events)},
        ).scalar_one()
    )


def commit_step(conn: sa.Connection, payload: dict[str, Any]) -> dict[str, Any]:
    """Commit one agent step with one statement (see ``helix.commit_step`` in schema/002)."""
    result: dict[str, Any] = conn.execute(
        sa.text("SELECT helix.commit_step(CAST(:p AS jsonb))"), {"p": to_json(payload)}
    ).scalar_one()
    return result


def end_run(
    conn: sa.Connection,
    *,
    session_id: str,
    run: int,
    status: str,
    error: str | None = None,
    stop_reason: str | None = None,
    event: dict[str, Any] | None = None,
) -> bool:
    """End a run still in progress outside a step commit (abort, a failing loop).

    Returns False, writing nothing, when the run had already ended.
    """
    return bool(conn.execute(
        sa.text(
            "SELECT helix.end_run(:id, :run, :status, :err, :reason, CAST(:ev AS jsonb))"
        ),
        {
            "id": session_id,
            "run": run,
            "status": status,
            "err": error,
            "reason": stop_reason,
            "ev": to_json(event) if event is not None else None,
        },
    ).scalar_one())


def request_interrupt(conn: sa.Connection, session_id: str) -> bool:
    """Ask the session's running loop to stop after its current step. False if not running."""
    row = conn.execute(
        sa.text(
            "UPDATE helix.sessions SET interrupt_requested = true, updated_at = now()"
            " WHERE id = :id AND status IN ('active', 'awaiting_approval', 'awaiting_client_tool') RETURNING id"
        ),
        {"id": session_id},
    ).first()
    return row is not None


def insert_pending_calls(conn: sa.Connection, calls: list[dict[str, Any]]) -> None:
    """Record gated tool calls (``kind`` approval | client) with their deadline."""
    conn.execute(
        sa.text(
            "INSERT INTO helix.pending_tool_calls (session_id, tool_call_id, root_session_id, workflow_id, run, step,"
            " tool_name, kind, input, output_schema, deadline)"
            " SELECT c.session_id, c.tool_call_id, c.root_session_id, c.workflow_id, c.run, c.step, c.tool_name, c.kind,"
            "  c.input, c.output_schema, CASE WHEN c.timeout IS NULL THEN NULL"
            "  ELSE now() + make_interval(secs => c.timeout) END"
            " FROM jsonb_to_recordset(CAST(:calls AS jsonb)) AS c(session_id text, tool_call_id text,"
            "  root_session_id text, workflow_id text, run integer, step integer, tool_name text, kind text,"
            "  input jsonb, output_schema jsonb, timeout double precision)"
            " ON CONFLICT (session_id, tool_call_id) DO NOTHING"
        ),
        {"calls": to_json(calls)},
    )


def set_status(conn: sa.Connection, session_id: str, status: str) -> None:
    conn.execute(
        sa.text("UPDATE helix.sessions SET status = :st, updated_at = now() WHERE id = :id"),
        {"id": session_id, "st": status},
    )


def record_answer(conn: sa.Connection, session_id: str, tool_call_id: str, kind: str, answer: dict[str, Any]) -> bool:
    """Insert the audit row of an answer; False when the call was already answered."""
    row = conn.execute(
        sa.text(
            "INSERT INTO helix.tool_call_answers (session_id, tool_call_id, kind, approved, reason, answered_by, answer)"
            " VALUES (:s, :t, :kind, :approved, :reason, :by, CAST(:answer AS jsonb))"
            " ON CONFLICT (session_id, tool_call_id) DO NOTHING RETURNING 1"
        ),
        {
            "s": session_id,
            "t": tool_call_id,
            "kind": kind,
            "approved": answer.get("approved"),
            "reason": answer.get("reason") or answer.get("error"),
            "by": answer.get("approver"),
            "answer": to_json(answer),
        },
    ).first()
    return row is not None


def recorded_answer(conn: sa.Connection, session_id: str, tool_call_id: str) -> dict[str, Any]:
    answer: dict[str, Any] = conn.execute(
        sa.text("SELECT answer FROM helix.tool_call_answers WHERE session_id = :s AND tool_call_id = :t"),
        {"s": session_id, "t": tool_call_id},
    ).scalar_one()
    return answer
