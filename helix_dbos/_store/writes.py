"""Writes to the ``helix`` schema. Each function runs inside the caller's transaction.

The runtime calls these inside DBOS datasource transactions, so each write commits
atomically with the checkpoint of the workflow step that made it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import psycopg
from psycopg import AsyncConnection, Connection

from helix_dbos.events import Event, StatePatchEvent
from helix_dbos._store import dbos_tables
from helix_dbos._store.reads import session_num
from helix_dbos._store.records import (
    AnswerWindow, CommitOutcome, HookStateSave, RecordedOutcome, StepCommit, WaitState,
)
from helix_dbos._store.statements import all_rows, first_row, first_value, first_row_async, to_json


def lock_session(conn: Connection[Any], session_id: str) -> dict[str, Any] | None:
    """Select the session row FOR UPDATE (None when absent)."""
    return first_row(
        conn,
        "SELECT s.id, s.agent_name, s.status, s.step_count, s.run_count, s.message_count, s.event_seq,"
        " p.id AS parent_session_id, s.parent_tool_call_id"
        " FROM helix.sessions s LEFT JOIN helix.sessions p ON p.num = s.parent_session_num"
        " WHERE s.id = %(id)s FOR UPDATE OF s",
        {"id": session_id},
    )


def claim_run(conn: Connection[Any], claim: dict[str, Any]) -> dict[str, Any]:
    """Claim a run, or find it claimed, with one statement (``helix.claim_run``, which
    documents ``claim`` and the answer; ``_durable/run_claim.py`` makes one and reads the other)."""
    found: dict[str, Any] = first_value(conn, "SELECT helix.claim_run(CAST(%(p)s AS jsonb))", {"p": to_json(claim)})
    return found


def claim_child_session(
    conn: Connection[Any],
    *,
    session_id: str,
    agent_name: str,
    initial_state: dict[str, Any],
    root_session_id: str,
    parent_session_id: str,
    parent_tool_call_id: str,
    first_workflow_id: str,
) -> str | None:
    """Create a sub-agent's session for its parent's call, or find it already created by
    that call; None when the session is the call's, else why it is not (and nothing is
    written): a session of that id exists with another parent or none, or a run of it was
    queued before its row was written (``first_workflow_id`` exists)."""
    made = conn.execute(
        (
            "SELECT helix.insert_session(%(id)s, %(agent)s, %(root)s, %(parent)s, %(ptc)s, NULL, CAST(%(state)s AS jsonb))"
            f" WHERE NOT {dbos_tables.WORKFLOW_EXISTS.format(workflow_id='%(wf)s')}"
        ),
        {"id": session_id, "agent": agent_name, "root": root_session_id, "parent": parent_session_id,
         "ptc": parent_tool_call_id, "wf": first_workflow_id, "state": to_json(initial_state)},
    ).fetchone()
    if made is not None and made[0] is not None:
        return None
    owner = conn.execute(
        (
            "SELECT p.id, s.parent_tool_call_id FROM helix.sessions s"
            " LEFT JOIN helix.sessions p ON p.num = s.parent_session_num WHERE s.id = %(id)s"
        ),
        {"id": session_id},
    ).fetchone()
    if owner is not None and tuple(owner) == (parent_session_id, parent_tool_call_id):
        return None
    return f"session {session_id!r} already exists and was not created by this call" + (
        "" if owner is not None else " (a run of it was started before)"
    )


def follow_run_workflow(conn: Connection[Any], workflow_id: str) -> None:
    """Make a waiter or continuation workflow the one that holds its run
    (``helix.runs.workflow_id``), unless the run names a later one already. helix's
    trigger does it when DBOS creates the workflow; the workflow's own first transaction
    calls this too, so a trigger firing that failed is made up."""
    conn.execute("SELECT helix.follow_run_workflow(%(wf)s)", {"wf": workflow_id})


def append_events(conn: Connection[Any], session_id: str, run: int, step: int, events: list[Event]) -> int:
    """Append events to the session's stream; return the last seq."""
    return int(first_value(
        conn, "SELECT helix.append_events(%(id)s, %(run)s, %(step)s, CAST(%(e)s AS jsonb))",
        {"id": session_id, "run": run, "step": step, "e": to_json([e.to_row() for e in events])},
    ))


def commit_step(conn: Connection[Any], commit: StepCommit) -> CommitOutcome:
    """Commit one agent step with one statement (``helix.commit_step``),
    which also drops the step's recorded tool outcomes (:func:`record_tool_outcome`): its
    checkpoints now hold them. Safe to repeat: a step already committed writes nothing and
    answers as it first did."""
    result = first_value(conn, "SELECT helix.commit_step(CAST(%(p)s AS jsonb))", {"p": to_json(commit.to_json_payload())})
    return CommitOutcome.model_validate(result)


def stream_key_taken(error: psycopg.errors.UniqueViolation) -> bool:
    """Whether ``error`` is an event whose key the session's stream holds at that step
    (``events_step_key_idx``): what a ``fresh`` :func:`commit_step` meets when it was not."""
    return error.diag.constraint_name == "events_step_key_idx"


def save_hook_state(conn: Connection[Any], save: HookStateSave) -> list[dict[str, Any]] | None:
    """Append what a committed step's hooks wrote: the step's second patch (part 1), its snapshot (when the step has one) and a ``state_patch`` event.

    Returns the patch as stored, or None, writing nothing, when the session is no longer
    at that step of that run (a later run or step began: the hooks' view is stale).
    """
    payload = save.storable_payload()
    row = lock_session(conn, save.session_id)
    if row is None or (row["run_count"], row["step_count"]) != (save.run, save.step):
        return None
    params = {"s": save.session_id, "n": save.step, "run": save.run, "p": to_json(payload["patch"])}
    conn.execute(
        (
            f"SELECT helix.insert_state_patch({session_num('s')}, %(n)s, CAST(1 AS smallint), %(run)s, CAST(%(p)s AS jsonb))"
        ),
        params,
    )
    if payload["snapshot"] is not None:
        conn.execute(
            (
                "UPDATE helix.state_snapshots SET state = CAST(%(st)s AS jsonb)"
                f" WHERE session_num = {session_num('s')} AND step = %(n)s"
            ),
            {**params, "st": to_json(payload["snapshot"])},
        )
    append_events(conn, save.session_id, save.run, save.step, [StatePatchEvent(patches=payload["patch"])])
    return list(payload["patch"])


def record_tool_outcome(conn: Connection[Any], outcome: RecordedOutcome) -> None:
    """Record how a tool call ended, as soon as it did; the first record
    of a call stays."""
    conn.execute(
        (
            "INSERT INTO helix.tool_outcomes (session_num, step, tool_call_id, run, tool_name, call_digest, outcome)"
            f" VALUES ({session_num('session_id')}, %(step)s, %(tool_call_id)s, %(run)s, %(tool_name)s, %(call_digest)s,"
            " CAST(%(outcome)s AS json))"
            " ON CONFLICT DO NOTHING"
        ),
        {**outcome.model_dump(exclude={"outcome"}), "outcome": to_json(outcome.outcome)},
    )


def end_run(
    conn: Connection[Any],
    *,
    session_id: str,
    run: int,
    status: str,
    error: str | None = None,
    stop_reason: str | None = None,
    event: Event | None = None,
) -> bool:
    """End a run still in progress outside a step commit (abort, a failing loop).

    Returns False, writing nothing, when the run had already ended.
    """
    return bool(first_value(
        conn,
        "SELECT helix.end_run(%(id)s, %(run)s, %(status)s, %(err)s, %(reason)s, CAST(%(ev)s AS jsonb))",
        {
            "id": session_id,
            "run": run,
            "status": status,
            "err": error,
            "reason": stop_reason,
            "ev": to_json(event.to_row()) if event is not None else None,
        },
    ))


REQUEST_INTERRUPT = (
    "UPDATE helix.sessions SET interrupt_requested = true"
    " WHERE id = %(id)s AND status = ANY (helix.active_statuses()) RETURNING id"
)
"""The statement of :func:`request_interrupt` (parameter ``id``): one row when the session runs."""


def request_interrupt(conn: Connection[Any], session_id: str) -> bool:
    """Ask the session's running loop to stop after its current step. False if not running."""
    return first_row(conn, REQUEST_INTERRUPT, {"id": session_id}) is not None


async def request_interrupt_async(conn: AsyncConnection[Any], session_id: str) -> bool:
    """:func:`request_interrupt` over an async connection (inside the caller's transaction)."""
    return await first_row_async(conn, REQUEST_INTERRUPT, {"id": session_id}) is not None


def insert_pending_calls(conn: Connection[Any], calls: list[dict[str, Any]]) -> None:
    """Record gated tool calls (``kind`` approval | client) with their deadline."""
    conn.execute(
        (
            "INSERT INTO helix.pending_tool_calls (session_num, tool_call_id, root_session_num, workflow_id, run, step,"
            " tool_name, kind, input, output_schema, deadline)"
            " SELECT s.num, c.tool_call_id, s.root_session_num, c.workflow_id, c.run, c.step, c.tool_name, c.kind,"
            "  c.input, c.output_schema, CASE WHEN c.timeout IS NULL THEN NULL"
            "  ELSE now() + make_interval(secs => c.timeout) END"
            " FROM jsonb_to_recordset(CAST(%(calls)s AS jsonb)) AS c(session_id text, tool_call_id text,"
            "  workflow_id text, run integer, step integer, tool_name text, kind text,"
            "  input jsonb, output_schema jsonb, timeout double precision)"
            " JOIN helix.sessions s ON s.id = c.session_id"
            " ON CONFLICT (session_num, tool_call_id) DO NOTHING"
        ),
        {"calls": to_json(calls)},
    )


def set_status(conn: Connection[Any], session_id: str, status: str) -> None:
    conn.execute(
        "UPDATE helix.sessions SET status = %(st)s, updated_at = now() WHERE id = %(id)s",
        {"id": session_id, "st": status},
    )


def lock_call_for_answer(conn: Connection[Any], session_id: str, tool_call_id: str) -> AnswerWindow | None:
    """Lock the gated call's row, then read whether it may take an answer now (None: no such call).

    The lock orders an answer against :func:`collect_answers`, which times calls out
    under the same lock: a call is answered in time or timed out, never both. ``now`` is
    read after the lock is held.
    """
    params = {"s": session_id, "t": tool_call_id}
    locked = conn.execute(
        (
            f"SELECT 1 FROM helix.pending_tool_calls WHERE session_num = {session_num('s')} AND tool_call_id = %(t)s"
            " FOR UPDATE"
        ),
        params,
    ).fetchone()
    if locked is None:
        return None
    row = first_row(
        conn,
        "SELECT pc.status, pc.deadline, statement_timestamp() AS now,"
        " EXISTS (SELECT 1 FROM helix.tool_call_answers a"
        "         WHERE a.session_num = pc.session_num AND a.tool_call_id = pc.tool_call_id) AS answered"
        f" FROM helix.pending_tool_calls pc WHERE pc.session_num = {session_num('s')} AND pc.tool_call_id = %(t)s",
        params,
    )
    return AnswerWindow.model_validate(row)


def record_answer(
    conn: Connection[Any],
    session_id: str,
    tool_call_id: str,
    kind: str,
    answer: dict[str, Any],
    answered_at: datetime | None = None,
) -> bool:
    """Insert the audit row of an answer (``answered_at`` defaults to the transaction's
    ``now()``); False when the call was already answered."""
    row = conn.execute(
        (
            "INSERT INTO helix.tool_call_answers"
            " (session_num, tool_call_id, kind, approved, reason, answered_by, answer, answered_at)"
            f" VALUES ({session_num('s')}, %(t)s, %(kind)s, %(approved)s, %(reason)s, %(by)s, CAST(%(answer)s AS jsonb),"
            " COALESCE(%(at)s, now()))"
            " ON CONFLICT (session_num, tool_call_id) DO NOTHING RETURNING 1"
        ),
        {
            "s": session_id,
            "t": tool_call_id,
            "kind": kind,
            "approved": answer.get("approved"),
            "reason": answer.get("reason") or answer.get("error"),
            "by": answer.get("approver"),
            "answer": to_json(answer),
            "at": answered_at,
        },
    ).fetchone()
    return row is not None


def collect_answers(conn: Connection[Any], session_id: str, tool_call_ids: list[str]) -> WaitState:
    """Settle what can be settled of a step's waiting calls, by the database's clock.

    A call answered before its deadline gets its recorded answer; a call whose deadline
    has passed without one (an answer recorded after it does not count) is marked
    ``timed_out`` here, so it leaves the pending list and refuses answers at once; the
    rest keep waiting, and ``wait`` says until the first of their deadlines.
    """
    params = {"s": session_id, "ids": list(tool_call_ids)}
    conn.execute(
        (
            f"SELECT 1 FROM helix.pending_tool_calls WHERE session_num = {session_num('s')}"
            " AND tool_call_id = ANY(%(ids)s) ORDER BY tool_call_id FOR UPDATE"
        ),
        params,
    )
    rows = all_rows(
        conn,
        "SELECT pc.tool_call_id, pc.status, pc.deadline, a.answer, a.answered_at, statement_timestamp() AS now"
        " FROM helix.pending_tool_calls pc"
        " LEFT JOIN helix.tool_call_answers a ON a.session_num = pc.session_num AND a.tool_call_id = pc.tool_call_id"
        f" WHERE pc.session_num = {session_num('s')} AND pc.tool_call_id = ANY(%(ids)s)",
        params,
    )
    state = WaitState()
    timed_out: list[str] = []
    for row in rows:
        deadline, now = row["deadline"], row["now"]
        if row["answered_at"] is not None and (deadline is None or row["answered_at"] < deadline):
            state.answers[row["tool_call_id"]] = row["answer"]
        elif row["status"] == "timed_out" or deadline is not None and now >= deadline:
            state.answers[row["tool_call_id"]] = None
            timed_out.append(row["tool_call_id"])
        elif deadline is not None:
            left = (deadline - now).total_seconds()
            state.wait = left if state.wait is None else min(state.wait, left)
    if timed_out:
        conn.execute(
            (
                "UPDATE helix.pending_tool_calls SET status = 'timed_out'"
                f" WHERE session_num = {session_num('s')} AND tool_call_id = ANY(%(ids)s) AND status = 'pending'"
            ),
            {"s": session_id, "ids": timed_out},
        )
    return state


def fork_session(conn: Connection[Any], source_id: str, new_id: str, from_step: int) -> None:
    """Copy the source session's transcript, state snapshots and patches up to ``from_step``
    into a new, interrupted session ``new_id`` of the same owner. Run 0 marks the
    inherited history."""
    params = {"src": source_id, "new": new_id, "n": from_step}
    conn.execute(
        (
            "INSERT INTO helix.sessions (num, id, agent_name, status, step_count, root_session_num, message_count, owner)"
            " SELECT n, %(new)s, agent_name, 'interrupted', %(n)s, n,"
            f"  (SELECT count(*) FROM helix.messages WHERE session_num = {session_num('src')} AND step <= %(n)s), owner"
            " FROM helix.sessions, nextval(pg_get_serial_sequence('helix.sessions', 'num')) AS n WHERE id = %(src)s"
        ),
        params,
    )
    conn.execute(
        (
            "INSERT INTO helix.messages (session_num, seq, run, step, message)"
            f" SELECT {session_num('new')}, seq, 0, step, message"
            f" FROM helix.messages WHERE session_num = {session_num('src')} AND step <= %(n)s"
        ),
        params,
    )
    conn.execute(
        (
            "INSERT INTO helix.state_snapshots (session_num, step, state)"
            f" SELECT {session_num('new')}, step, state FROM helix.state_snapshots"
            f" WHERE session_num = {session_num('src')} AND step <= %(n)s"
        ),
        params,
    )
    conn.execute(
        (
            "INSERT INTO helix.state_patches (session_num, step, part, run, patch)"
            f" SELECT {session_num('new')}, step, part, 0, patch FROM helix.state_patches"
            f" WHERE session_num = {session_num('src')} AND step <= %(n)s"
        ),
        params,
    )
