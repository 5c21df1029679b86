"""The operator API: inspect sessions and answer, cancel, resume or fork them from any
process, with nothing but the database URL.

No agent is imported and DBOS is not launched. Reads go to the ``helix`` schema; what
must reach a workflow (an answer, a cancel, a resume) goes through a ``DBOSClient``
made for the call and destroyed after it. The ``helix-dbos`` CLI is a thin shell over
these functions::

    from helix_dbos import admin

    for call in admin.list_pending(url):
        print(call.session_id, call.tool_call_id, call.tool_name, call.input)
    admin.approve(url, "s1", "call_1", approver="ana")
    admin.deny(url, "s1", "call_2", reason="too expensive")
    admin.submit(url, "s1", "call_3", result={"city": "Paris"})

Every function raises :class:`~helix_dbos.errors.SessionNotFoundError`,
:class:`~helix_dbos.errors.ToolCallNotPendingError`,
:class:`~helix_dbos.runtime.hitl.InvalidToolResultError` or another
:class:`~helix_dbos.errors.HelixError` with a message that says what to do.

Runs are started only by processes that registered the session's agent: :func:`resume`
restarts a cancelled or crashed *workflow*, but an interrupted (or forked) session needs
a worker to call ``executor.resume(agent, session_id)``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel, Field

from helix_dbos.errors import HelixError, SessionNotFoundError
from helix_dbos.runtime.control import abort_tree
from helix_dbos.runtime.hitl import ApprovalResponse, ClientToolResult, SubmitOutcome, ToolAnswer, submit_tool_result
from helix_dbos.runtime.requests import run_workflow_id
from helix_dbos.runtime.streaming import RUN_END_EVENTS, follow_events
from helix_dbos.store import reads, writes
from helix_dbos.store.engine import create_engine
from helix_dbos.store.records import EventRecord, PendingToolCall, RunRecord, SessionRecord, UsageSummary

RESUMABLE_WORKFLOW_STATUSES = ("CANCELLED", "ERROR", "MAX_RECOVERY_ATTEMPTS_EXCEEDED")
"""DBOS workflow statuses that :func:`resume` restarts where they stopped."""

__all__ = [
    "AnswerRecord",
    "RunControl",
    "SessionDetail",
    "approve",
    "cancel",
    "deny",
    "fork",
    "list_pending",
    "list_sessions",
    "resume",
    "show_session",
    "state_at",
    "submit",
    "tail",
]


# --- records --------------------------------------------------------------------------


class AnswerRecord(BaseModel):
    """The audit row of an answered call: who, when, what and why."""

    session_id: str
    tool_call_id: str
    kind: str
    approved: bool | None = None
    reason: str | None = None
    answered_by: str | None = None
    answer: Any = None
    answered_at: datetime


class TranscriptEntry(BaseModel):
    """One message of a transcript with its place in the logs."""

    seq: int
    run: int
    step: int
    message: dict[str, Any]


class SessionDetail(BaseModel):
    """Everything an operator looks at for one session (see :func:`show_session`)."""

    session: SessionRecord
    transcript: list[TranscriptEntry] = Field(default_factory=list)
    state: dict[str, Any] = Field(default_factory=dict)
    runs: list[RunRecord] = Field(default_factory=list)
    pending: list[PendingToolCall] = Field(default_factory=list)
    answers: list[AnswerRecord] = Field(default_factory=list)
    usage: UsageSummary = Field(default_factory=UsageSummary)
    children: list[SessionRecord] = Field(default_factory=list)
    """Every sub-agent session below this one, depth first (``parent_session_id`` links them)."""
    forked_from: dict[str, Any] | None = None
    """``{"session_id", "step"}`` when the session was made by :func:`fork`."""


class RunControl(BaseModel):
    """What :func:`cancel` or :func:`resume` did to a session's latest run."""

    session_id: str
    run: int
    workflow_id: str
    status: str
    """The session's status afterwards."""
    changed: bool
    """False when there was nothing to do (the run had already ended by itself)."""


# --- reading ----------------------------------------------------------------------------


def list_sessions(url: str, limit: int = 50, status: str | None = None) -> list[SessionRecord]:
    """Sessions, most recently updated first (rows only: no transcript or state)."""
    with _engine(url) as engine, engine.connect() as conn:
        return reads.list_sessions(conn, limit=limit, status=status)


def show_session(url: str, session_id: str) -> SessionDetail:
    """The session with its transcript, state, runs, pending calls (its sub-sessions'
    too), answers, usage and child sessions."""
    with _engine(url) as engine, engine.connect() as conn:
        row = _require_session(conn, session_id)
        forked = conn.execute(
            sa.text("SELECT data FROM helix.events WHERE session_id = :id AND type = 'forked' ORDER BY seq LIMIT 1"),
            {"id": session_id},
        ).scalar()
        return SessionDetail(
            session=row,
            transcript=_transcript(conn, session_id),
            state=reads.load_state(conn, session_id),
            runs=reads.list_runs(conn, session_id),
            pending=reads.list_pending(conn, session_id),
            answers=_answers(conn, session_id),
            usage=reads.usage_summary(conn, session_id),
            children=reads.list_descendant_sessions(conn, session_id),
            forked_from={"session_id": forked["source_session_id"], "step": forked["from_step"]} if forked else None,
        )


def state_at(url: str, session_id: str, step: int | None = None) -> dict[str, Any]:
    """The custom state after step ``step`` (default: the latest), rebuilt from the patch log."""
    with _engine(url) as engine, engine.connect() as conn:
        row = _require_session(conn, session_id)
        _check_step(row, step)
        return reads.load_state(conn, session_id, step)


def list_pending(url: str, session_id: str | None = None) -> list[PendingToolCall]:
    """Calls waiting for an answer: all of them, or one session's (a root session's list
    includes the calls of its sub-sessions)."""
    with _engine(url) as engine, engine.connect() as conn:
        if session_id is not None:
            _require_session(conn, session_id)
        return reads.list_pending(conn, session_id)


def tail(url: str, session_id: str, from_seq: int = 0, follow: bool = True) -> Iterator[EventRecord]:
    """Yield the session's durable events from ``from_seq`` on.

    Without ``follow``, only the events already written. With it, events are yielded as
    they are written until the session has no run in progress (at once, after the events
    already written, for a session that is not running).
    """
    with _engine(url) as engine, engine.connect() as conn:
        _require_session(conn, session_id)  # raise now, not at the first next()
    return _tail(url, session_id, from_seq, follow)


def _tail(url: str, session_id: str, from_seq: int, follow: bool) -> Iterator[EventRecord]:
    with _engine(url) as engine:
        follow = follow and _running(engine, session_id)
        for event in follow_events(url, session_id, from_seq, engine=engine, follow=follow, until_run_end=False):
            yield event
            # A run's end event commits with the run's final status, so the status read
            # now is at least that new; a resumed or newer run keeps the tail going.
            if follow and event.type in RUN_END_EVENTS and not _running(engine, session_id):
                return


# --- answering ------------------------------------------------------------------------


def approve(
    url: str, session_id: str, tool_call_id: str, reason: str | None = None, approver: str | None = None
) -> SubmitOutcome:
    """Approve a gated call: the tool runs with its original input.

    ``status="already_answered"`` means an earlier answer stands and nothing changed.
    """
    answer = ApprovalResponse(tool_call_id=tool_call_id, approved=True, reason=reason, approver=approver)
    return _submit(url, session_id, answer)


def deny(url: str, session_id: str, tool_call_id: str, reason: str, approver: str | None = None) -> SubmitOutcome:
    """Deny a gated call: the tool never runs; the model reads ``Tool call X was not
    approved by the user: <reason>`` as its result."""
    answer = ApprovalResponse(tool_call_id=tool_call_id, approved=False, reason=reason, approver=approver)
    return _submit(url, session_id, answer)


def submit(url: str, session_id: str, tool_call_id: str, result: Any = None, error: str | None = None) -> SubmitOutcome:
    """Give a client-executed call its result (checked against the tool's output schema)
    or its error."""
    return _submit(url, session_id, ClientToolResult(tool_call_id=tool_call_id, result=result, error=error))


# --- controlling runs -----------------------------------------------------------------


def cancel(url: str, session_id: str, reason: str = "cancelled by an operator") -> RunControl:
    """Cancel the workflow of the session's run in progress; the run ends ``aborted``.

    Its pending calls are cancelled with it. :func:`resume` restarts the workflow where
    it stopped; a worker's ``executor.resume`` starts a new run instead.
    """
    with _engine(url) as engine, _dbos_client(url) as client:
        with engine.connect() as conn:
            row = _require_session(conn, session_id)
        if row.status not in writes.ACTIVE_STATUSES:
            raise HelixError(f"session {session_id!r} has no run in progress (status {row.status})")
        workflow_id = run_workflow_id(session_id, row.run_count)
        ended = abort_tree(engine, lambda wf: client().cancel_workflow(wf), session_id, reason)
        with engine.connect() as conn:
            status = _require_session(conn, session_id).status
        return RunControl(session_id=session_id, run=row.run_count, workflow_id=workflow_id, status=status, changed=ended)


def resume(url: str, session_id: str) -> RunControl:
    """Restart the workflow of the session's latest run where it stopped, when DBOS
    cancelled it (``cancel``, ``executor.abort``) or it ended in an error.

    The session and run become active again (or wait again for their pending calls) and
    any process that runs DBOS with the same application version picks the workflow up.
    An interrupted, failed or forked session needs a new run instead, which only a
    process that registered the agent can start: ``executor.resume(agent, session_id)``.
    """
    with _engine(url) as engine, _dbos_client(url) as client:
        with engine.connect() as conn:
            row = _require_session(conn, session_id)
        workflow_id = run_workflow_id(session_id, row.run_count) if row.run_count else None
        found = client().list_workflows(workflow_ids=[workflow_id], load_input=False, load_output=False) if workflow_id else []
        workflow_status = found[0].status if found else None
        if workflow_id is None or workflow_status not in RESUMABLE_WORKFLOW_STATUSES:
            raise HelixError(_not_resumable(row, workflow_status))
        with engine.begin() as conn:
            status = _reopen_run(conn, session_id, row.run_count, workflow_id)
            # Resumed while the session row is locked: the restarted workflow's first
            # commit waits for this transaction, so it always finds the run active.
            client().resume_workflow(workflow_id)
        return RunControl(session_id=session_id, run=row.run_count, workflow_id=workflow_id, status=status, changed=True)


def fork(url: str, session_id: str, from_step: int, new_session_id: str | None = None) -> SessionRecord:
    """A new session whose transcript and state are those of ``session_id`` after step
    ``from_step``.

    The fork gets the source's messages of steps ``<= from_step`` (what the source's
    step ``from_step + 1`` was given, including the input of a run that started there)
    and its state and patch log up to that step, with the same step numbers, so step
    budgets and ``state_at`` agree with the source. Usage and events are not copied; its
    first event, ``forked``, names the source. Its status is ``interrupted``: a worker
    that registered the agent continues it with ``executor.resume(agent, new_id)``.
    """
    new_id = new_session_id or str(uuid.uuid4())
    with _engine(url) as engine, engine.begin() as conn:
        row = _require_session(conn, session_id)
        if not 0 <= from_step <= row.step_count:
            raise HelixError(f"session {session_id!r} has steps 0 to {row.step_count}; cannot fork from step {from_step}")
        if reads.get_session_row(conn, new_id) is not None:
            raise HelixError(f"a session {new_id!r} already exists")
        params = {"src": session_id, "new": new_id, "n": from_step}
        conn.execute(
            sa.text(
                "INSERT INTO helix.sessions (id, agent_name, status, step_count, root_session_id, message_count)"
                " SELECT :new, agent_name, 'interrupted', :n, :new,"
                "  (SELECT count(*) FROM helix.messages WHERE session_id = :src AND step <= :n)"
                " FROM helix.sessions WHERE id = :src"
            ),
            params,
        )
        # Run 0 marks history inherited from the source; the fork's own runs start at 1.
        conn.execute(
            sa.text(
                "INSERT INTO helix.messages (session_id, seq, run, step, message)"
                " SELECT :new, row_number() OVER (ORDER BY seq) - 1, 0, step, message"
                " FROM helix.messages WHERE session_id = :src AND step <= :n"
            ),
            params,
        )
        conn.execute(
            sa.text(
                "INSERT INTO helix.state_snapshots (session_id, step, state)"
                " SELECT :new, step, state FROM helix.state_snapshots WHERE session_id = :src AND step <= :n"
            ),
            params,
        )
        conn.execute(
            sa.text(
                "INSERT INTO helix.state_patches (session_id, step, run, patch)"
                " SELECT :new, step, 0, patch FROM helix.state_patches WHERE session_id = :src AND step <= :n"
            ),
            params,
        )
        writes.append_events(
            conn, new_id, 0, from_step,
            [{"type": "forked", "data": {"source_session_id": session_id, "from_step": from_step}}],
        )
        created = reads.get_session_row(conn, new_id)
        assert created is not None
        return created


# --- helpers ------------------------------------------------------------------------------


@contextmanager
def _engine(url: str) -> Iterator[sa.Engine]:
    engine = create_engine(url)
    try:
        yield engine
    finally:
        engine.dispose()


@contextmanager
def _dbos_client(url: str) -> Iterator[Any]:
    """``client()`` makes one ``DBOSClient`` on first use (importing DBOS only then); it
    is destroyed when the block ends."""
    made: list[Any] = []

    def client() -> Any:
        if not made:
            from dbos import DBOSClient

            made.append(DBOSClient(system_database_url=url))
        return made[0]

    try:
        yield client
    finally:
        for each in made:
            each.destroy()


def _submit(url: str, session_id: str, answer: ToolAnswer) -> SubmitOutcome:
    with _engine(url) as engine, _dbos_client(url) as client:

        def send(workflow_id: str, message: Any, topic: str, idempotency_key: str) -> None:
            client().send(workflow_id, message, topic, idempotency_key=idempotency_key)

        return submit_tool_result(engine, send, session_id, answer)


def _require_session(conn: sa.Connection, session_id: str) -> SessionRecord:
    row = reads.get_session_row(conn, session_id)
    if row is None:
        raise SessionNotFoundError(f"no session {session_id!r}")
    return row


def _running(engine: sa.Engine, session_id: str) -> bool:
    with engine.connect() as conn:
        return _require_session(conn, session_id).status in writes.ACTIVE_STATUSES


def _check_step(row: SessionRecord, step: int | None) -> None:
    if step is not None and not 0 <= step <= row.step_count:
        raise HelixError(f"session {row.id!r} has steps 0 to {row.step_count}; there is no step {step}")


def _not_resumable(row: SessionRecord, workflow_status: str | None) -> str:
    sid, agent = row.id, row.agent_name
    if row.status in writes.ACTIVE_STATUSES and workflow_status in ("PENDING", "ENQUEUED", "DELAYED"):
        return f"session {sid!r} is running (run {row.run_count}, status {row.status}); nothing to resume"
    if row.status == "completed":
        return f"session {sid!r} is completed; continue it with executor.execute({agent!r}, <message>, session_id={sid!r})"
    if row.status in ("interrupted", "failed", "aborted"):
        return (
            f"session {sid!r} is {row.status}: a new run must be started by a worker that registered agent"
            f" {agent!r}: executor.resume({agent!r}, {sid!r})"
        )
    return (
        f"session {sid!r} (status {row.status}) has no cancelled or failed workflow to resume"
        f" (workflow status {workflow_status})"
    )


def _reopen_run(conn: sa.Connection, session_id: str, run: int, workflow_id: str) -> str:
    """Make run ``run`` active again, with the calls it was waiting for pending again."""
    if writes.lock_session(conn, session_id) is None:
        raise SessionNotFoundError(f"no session {session_id!r}")
    conn.execute(
        sa.text(
            "UPDATE helix.pending_tool_calls SET status = 'pending'"
            " WHERE session_id = :id AND run = :run AND status = 'cancelled'"
        ),
        {"id": session_id, "run": run},
    )
    kinds = set(
        conn.execute(
            sa.text(
                "SELECT DISTINCT kind FROM helix.pending_tool_calls"
                " WHERE session_id = :id AND run = :run AND status = 'pending'"
            ),
            {"id": session_id, "run": run},
        ).scalars()
    )
    status = "awaiting_approval" if "approval" in kinds else "awaiting_client_tool" if kinds else "active"
    updated = conn.execute(
        sa.text(
            "UPDATE helix.sessions SET status = :st, error = NULL, stop_reason = NULL, interrupt_requested = false,"
            " version = version + 1, updated_at = now() WHERE id = :id AND run_count = :run RETURNING step_count"
        ),
        {"id": session_id, "run": run, "st": status},
    ).first()
    if updated is None:
        raise HelixError(f"session {session_id!r} moved on to another run; nothing to resume")
    conn.execute(
        sa.text(
            "UPDATE helix.runs SET status = 'active', error = NULL, stop_reason = NULL, end_step = NULL, ended_at = NULL"
            " WHERE session_id = :id AND run = :run"
        ),
        {"id": session_id, "run": run},
    )
    writes.append_events(
        conn, session_id, run, updated[0], [{"type": "resumed", "data": {"run": run, "workflow_id": workflow_id}}]
    )
    return status


def _transcript(conn: sa.Connection, session_id: str) -> list[TranscriptEntry]:
    rows = conn.execute(
        sa.text("SELECT seq, run, step, message FROM helix.messages WHERE session_id = :id ORDER BY seq"),
        {"id": session_id},
    ).mappings()
    return [TranscriptEntry.model_validate(dict(r)) for r in rows]


def _answers(conn: sa.Connection, session_id: str) -> list[AnswerRecord]:
    rows = conn.execute(
        sa.text(
            "SELECT session_id, tool_call_id, kind, approved, reason, answered_by, answer, answered_at"
            " FROM helix.tool_call_answers WHERE session_id = :id ORDER BY answered_at, tool_call_id"
        ),
        {"id": session_id},
    ).mappings()
    return [AnswerRecord.model_validate(dict(r)) for r in rows]
