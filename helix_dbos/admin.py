"""The operator API: inspect sessions and answer, cancel, resume or fork them from any
process, with nothing but the database URL.

No agent is imported and DBOS is not launched. Reads go to the ``helix`` schema; what must
reach a workflow (an answer, a cancel, a resume) goes through a ``DBOSClient`` made for the
call. Each function runs the same command as the executor's method of the same name; the
``helix-dbos`` CLI is a thin shell over these::

    from helix_dbos import admin

    for call in admin.list_pending(url):
        print(call.session_id, call.tool_call_id, call.tool_name, call.input)
    admin.approve(url, "s1", "call_1", approver="ana")
    admin.deny(url, "s1", "call_2", reason="too expensive")
    admin.submit(url, "s1", "call_3", result={"city": "Paris"})

Every function raises a :class:`~helix_dbos.errors.HelixError` with a message that says
what to do: no such session, not pending, an invalid result, a schema that needs
``helix-dbos migrate``. None of them migrates or starts a database.

Async code (a FastAPI route) calls the ``*_async`` twins: ``await
admin.list_pending_async(url)``, ``await admin.approve_async(url, "s1", "call_1")``. Their
reads go over one async connection each, without a thread; an answer, a cancel and a
resume send to a workflow inside the transaction that records them, which only DBOS's
synchronous client can do, so those run in a worker thread.

Each call first connects and checks the schema, and fails at once with a
:class:`~helix_dbos.errors.DatabaseError` when that fails (the async twins check a URL's
schema once per process). Past that check, answering,
resuming and moving a run retry a lost connection, and raise :class:`~helix_dbos.errors.DatabaseUnavailableError` when the database
stays unreachable.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg
import sqlalchemy as sa

from helix_dbos.answers import ApprovalResponse, ClientToolResult, SubmitOutcome, ToolAnswer
from helix_dbos._client import commands
from helix_dbos._client.commands import PruneReport, RunControl, SessionDetail
from helix_dbos._client.queues import DEFAULT_QUEUE
from helix_dbos._client.streams import follow_events
from helix_dbos._client.workflows import ClientWorkflows
from helix_dbos._database import check_connection, libpq_url, redact, validate_url
from helix_dbos._deltas import DeltaRecord
from helix_dbos.errors import DatabaseError, HelixError
from helix_dbos.events import RUN_END_EVENTS
from helix_dbos._store import async_reads, reads
from helix_dbos._store import workers as workers_store
from helix_dbos._store.engine import create_engine
from helix_dbos._store.workers import WorkerRecord
from helix_dbos._store.migrations import check_schema
from helix_dbos._store.retention import Cutoff
from helix_dbos._store.records import (
    AnswerRecord,
    EventRecord,
    PendingToolCall,
    RunRecord,
    SessionRecord,
)
from helix_dbos._text import require_storable
from helix_dbos.types import ACTIVE_STATUSES

__all__ = [
    "AnswerRecord",
    "PruneReport",
    "RunControl",
    "SessionDetail",
    "WorkerStatus",
    "approve",
    "approve_async",
    "cancel",
    "cancel_async",
    "deny",
    "deny_async",
    "fork",
    "get_current_run",
    "get_session_async",
    "list_pending",
    "list_pending_async",
    "list_runs",
    "list_sessions",
    "list_sessions_async",
    "list_workers",
    "move",
    "prune",
    "resume",
    "resume_async",
    "show_session",
    "show_session_async",
    "state_at",
    "submit",
    "submit_async",
    "tail",
]


# --- reading ----------------------------------------------------------------------------


def list_sessions(url: str, limit: int = 50, status: str | None = None) -> list[SessionRecord]:
    """Sessions, most recently updated first (rows only: no transcript or state)."""
    require_storable("status", status)
    with _engine(url) as engine, engine.connect() as conn:
        return reads.list_sessions(conn, limit=limit, status=status)


def show_session(url: str, session_id: str) -> SessionDetail:
    """The session with its transcript, state, runs, pending calls (its sub-sessions'
    too), answers, usage and child sessions."""
    with _engine(url) as engine, engine.connect() as conn:
        return commands.session_detail(conn, session_id)


def list_runs(url: str, session_id: str) -> list[RunRecord]:
    """Every run of the session, oldest first, each with its DBOS workflow's status."""
    with _engine(url) as engine, engine.connect() as conn:
        commands.require_session(conn, session_id)
        return reads.list_runs(conn, session_id)


def get_current_run(url: str, session_id: str) -> RunRecord | None:
    """The session's latest run, or None for a session without runs (a fork not yet resumed)."""
    runs = list_runs(url, session_id)
    return runs[-1] if runs else None


def state_at(url: str, session_id: str, step: int | None = None) -> dict[str, Any]:
    """The custom state after step ``step`` (default: the latest), rebuilt from the patch log."""
    with _engine(url) as engine, engine.connect() as conn:
        row = commands.require_session(conn, session_id)
        if step is not None and not 0 <= step <= row.step_count:
            raise HelixError(f"session {row.id!r} has steps 0 to {row.step_count}; there is no step {step}")
        return reads.load_state(conn, session_id, step)


def list_pending(url: str, session_id: str | None = None) -> list[PendingToolCall]:
    """Calls waiting for an answer: all of them, or one session's (a root session's list
    includes the calls of its sub-sessions)."""
    with _engine(url) as engine, engine.connect() as conn:
        if session_id is not None:
            commands.require_session(conn, session_id)
        return reads.list_pending(conn, session_id)


def tail(
    url: str, session_id: str, from_seq: int = 0, follow: bool = True, deltas: bool = False
) -> Iterator[EventRecord | DeltaRecord]:
    """Yield the session's durable events from ``from_seq`` on, and with ``deltas`` (and
    ``follow``) the token deltas published while following (``DeltaRecord``, no ``seq``).

    Without ``follow``, only the events already written. With it, events are yielded as
    they are written until the session has no run in progress (at once, after the events
    already written, for a session that is not running).
    """
    with _engine(url) as engine, engine.connect() as conn:
        commands.require_session(conn, session_id)  # raise now, not at the first next()
    return _tail(url, session_id, from_seq, follow, deltas)


def _tail(
    url: str, session_id: str, from_seq: int, follow: bool, deltas: bool
) -> Iterator[EventRecord | DeltaRecord]:
    with _engine(url) as engine:
        follow = follow and _running(engine, session_id)
        items = follow_events(
            url, session_id, from_seq, engine=engine, follow=follow, until_run_end=False, deltas=deltas
        )
        for event in items:
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
    return _answer(url, session_id, ApprovalResponse(tool_call_id=tool_call_id, approved=True, reason=reason,
                                                     approver=approver))


def deny(url: str, session_id: str, tool_call_id: str, reason: str, approver: str | None = None) -> SubmitOutcome:
    """Deny a gated call: the tool never runs; the model reads ``Tool call X was not
    approved by the user: <reason>`` as its result."""
    return _answer(url, session_id, ApprovalResponse(tool_call_id=tool_call_id, approved=False, reason=reason,
                                                     approver=approver))


def submit(url: str, session_id: str, tool_call_id: str, result: Any = None, error: str | None = None) -> SubmitOutcome:
    """Give a client-executed call its result (checked against the tool's output schema)
    or its error."""
    return _answer(url, session_id, ClientToolResult(tool_call_id=tool_call_id, result=result, error=error))


def _answer(url: str, session_id: str, response: ToolAnswer) -> SubmitOutcome:
    with _engine(url) as engine, ClientWorkflows(url) as workflows:
        return commands.answer(engine, workflows, session_id, response)


# --- controlling runs -----------------------------------------------------------------


def cancel(url: str, session_id: str, reason: str = "cancelled by an operator") -> RunControl:
    """Cancel the workflow of the session's run in progress (and its sub-agents'); the run
    ends ``aborted`` and its pending calls are cancelled with it. :func:`resume` restarts
    the workflow where it stopped; a worker's ``executor.resume`` starts a new run instead.
    """
    with _engine(url) as engine, ClientWorkflows(url) as workflows:
        return commands.cancel(engine, workflows, session_id, reason)


def resume(url: str, session_id: str) -> RunControl:
    """Restart the workflow of the session's latest run where it stopped, when DBOS
    cancelled it (``cancel``, ``executor.abort``, ``dbos workflow cancel``) or it ended in
    an error.

    The run becomes active again (or waits again for its pending calls) and any process
    that runs DBOS with the same application version picks the workflow up. An
    interrupted, failed or forked session needs a new run instead, which only a process
    that registered the agent can start: ``executor.resume(agent, session_id)``.
    """
    with _engine(url) as engine, ClientWorkflows(url) as workflows:
        return commands.resume_workflow(engine, workflows, session_id)


def move(url: str, session_id: str, version: str, queue: str = DEFAULT_QUEUE) -> RunControl:
    """Move a run stranded on an application version no process runs any more to
    ``version``: its workflow is cancelled and a new run of the session is enqueued on
    ``queue`` for the workers of ``version``, from the last committed step (what the
    stranded run did in its unfinished step is done again)."""
    with _engine(url) as engine, ClientWorkflows(url) as workflows:
        return commands.move_to_version(engine, workflows, session_id, version, queue)


def fork(url: str, session_id: str, from_step: int, new_session_id: str | None = None) -> SessionRecord:
    """A new, interrupted session with ``session_id``'s transcript and state after step
    ``from_step`` (usage and events are not copied; its first event, ``forked``, names
    the source). A worker that registered the agent continues it with
    ``executor.resume(agent, new_id)``."""
    with _engine(url) as engine:
        return commands.fork(engine, session_id, from_step, new_session_id)


def prune(
    url: str, completed_before: timedelta | datetime, *, dry_run: bool = False, batch_size: int = 100
) -> PruneReport:
    """Remove sessions finished more than ``completed_before`` ago (a duration) or before
    it (a time), each with its whole sub-agent tree and their DBOS workflows,
    ``batch_size`` trees per transaction. A dry run reports what would go and removes
    nothing::

        report = admin.prune(url, timedelta(days=30), dry_run=True)
        print(report.sessions, "sessions and", report.workflows, "workflows would go")
    """
    cutoff = Cutoff(age=completed_before) if isinstance(completed_before, timedelta) else Cutoff(at=completed_before)
    with _engine(url) as engine, ClientWorkflows(url) as workflows:
        return commands.prune(engine, workflows, cutoff, dry_run=dry_run, batch_size=batch_size)


# --- workers ------------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkerStatus:
    """A process that runs (or ran) helix workflows, as ``helix-dbos workers`` shows it.

    ``status``: ``live``, ``draining``, ``dead`` (its lease expired and nobody adopted it
    yet), ``released`` (it stopped and handed its runs back), ``adopted`` (another process
    handed its runs back), or ``unknown`` (PENDING runs under an executor id that never
    kept a lease: ``helix-dbos recover --executor ID`` hands them back).
    """

    executor_id: str
    status: str
    application_version: str | None
    host: str | None
    pid: int | None
    queues: list[str] | None
    started_at: datetime | None
    last_seen: datetime | None
    pending_runs: int
    """Its workflows DBOS still holds PENDING (running, or waiting for a person)."""
    adopted_by: str | None = None
    adopted_runs: int | None = None
    note: str = ""


def list_workers(url: str) -> list[WorkerStatus]:
    """Every worker lease with its PENDING runs, then executors without a lease that
    still hold PENDING runs; the most recently seen first."""
    url = _checked(url)
    with psycopg.connect(libpq_url(url)) as conn:
        leases = workers_store.list_workers(conn)
    with ClientWorkflows(url) as workflows:
        pending = workflows.client.list_workflows(status="PENDING", load_input=False, load_output=False)
    held: dict[str, list[Any]] = {}
    for workflow in pending:
        held.setdefault(workflow.executor_id or "", []).append(workflow)
    live_versions = {(w.application_name, w.application_version) for w in leases if w.status in ("live", "draining")}
    found = [_worker_status(w, len(held.pop(w.executor_id, [])), live_versions) for w in leases]
    for executor_id, orphans in sorted(held.items()):
        versions = sorted({w.app_version or "?" for w in orphans})
        found.append(WorkerStatus(
            executor_id=executor_id, status="unknown", application_version=", ".join(versions), host=None, pid=None,
            queues=None, started_at=None, last_seen=None, pending_runs=len(orphans),
            note=f"kept no lease: helix-dbos recover --app APP --executor {executor_id}",
        ))
    return found


def _worker_status(worker: WorkerRecord, pending: int, live_versions: set[tuple[str, str]]) -> WorkerStatus:
    status = worker.status
    if status == "adopted":
        note = f"adopted by {worker.adopted_by} ({worker.adopted_runs} runs handed back)"
    elif status in ("dead", "released") and (worker.application_name, worker.application_version) not in live_versions:
        note = f"its runs wait for a live worker of version {worker.application_version}"
    elif status in ("dead", "released"):
        note = "a live worker of its version adopts it now"
    else:
        note = ""
    return WorkerStatus(
        executor_id=worker.executor_id, status=status, application_version=worker.application_version,
        host=worker.host, pid=worker.pid, queues=worker.queues, started_at=worker.started_at,
        last_seen=worker.last_seen, pending_runs=pending, adopted_by=worker.adopted_by,
        adopted_runs=worker.adopted_runs, note=note,
    )


# --- async twins ---------------------------------------------------------------------------


async def list_sessions_async(url: str, limit: int = 50, status: str | None = None) -> list[SessionRecord]:
    """:func:`list_sessions` for async code::

        sessions = await admin.list_sessions_async(url, status="awaiting_approval")
    """
    require_storable("status", status)
    async with await _connect_async(url) as conn:
        return await async_reads.list_sessions(conn, limit, status)


async def get_session_async(url: str, session_id: str) -> SessionRecord:
    """The session's row (no transcript or state), or :class:`SessionNotFoundError`."""
    require_storable("session_id", session_id)
    async with await _connect_async(url) as conn:
        return commands.found_session(await async_reads.get_session_row(conn, session_id), session_id)


async def show_session_async(url: str, session_id: str) -> SessionDetail:
    """:func:`show_session` for async code::

        detail = await admin.show_session_async(url, "s1")
        print(detail.session.status, detail.state, [call.tool_name for call in detail.pending])
    """
    require_storable("session_id", session_id)
    async with await _connect_async(url) as conn:
        return await commands.session_detail_async(conn, session_id)


async def list_pending_async(url: str, session_id: str | None = None) -> list[PendingToolCall]:
    """:func:`list_pending` for async code."""
    require_storable("session_id", session_id)
    async with await _connect_async(url) as conn:
        if session_id is not None:
            commands.found_session(await async_reads.get_session_row(conn, session_id), session_id)
        return await async_reads.list_pending(conn, session_id)


async def approve_async(
    url: str, session_id: str, tool_call_id: str, reason: str | None = None, approver: str | None = None
) -> SubmitOutcome:
    """:func:`approve` for async code (in a worker thread)."""
    return await asyncio.to_thread(approve, url, session_id, tool_call_id, reason, approver)


async def deny_async(url: str, session_id: str, tool_call_id: str, reason: str, approver: str | None = None) -> SubmitOutcome:
    """:func:`deny` for async code (in a worker thread)."""
    return await asyncio.to_thread(deny, url, session_id, tool_call_id, reason, approver)


async def submit_async(
    url: str, session_id: str, tool_call_id: str, result: Any = None, error: str | None = None
) -> SubmitOutcome:
    """:func:`submit` for async code (in a worker thread)."""
    return await asyncio.to_thread(submit, url, session_id, tool_call_id, result, error)


async def cancel_async(url: str, session_id: str, reason: str = "cancelled by an operator") -> RunControl:
    """:func:`cancel` for async code (in a worker thread)."""
    return await asyncio.to_thread(cancel, url, session_id, reason)


async def resume_async(url: str, session_id: str) -> RunControl:
    """:func:`resume` for async code (in a worker thread)."""
    return await asyncio.to_thread(resume, url, session_id)


_schema_checked: set[str] = set()
"""URLs whose connection and schema an async twin checked in this process."""


async def _connect_async(url: str) -> psycopg.AsyncConnection[Any]:
    """An autocommit async connection on ``url``, checked (once per process) as :func:`_checked` does."""
    url = validate_url(url)
    if url not in _schema_checked:
        await asyncio.to_thread(_checked, url)
        _schema_checked.add(url)
    try:
        return await psycopg.AsyncConnection.connect(libpq_url(url), autocommit=True, connect_timeout=5)
    except psycopg.Error as exc:
        raise DatabaseError(f"cannot connect to {redact(url)}: {str(exc).strip().splitlines()[0]}") from None


# --- helpers ------------------------------------------------------------------------------


@contextmanager
def _engine(url: str) -> Iterator[sa.Engine]:
    """An engine on ``url``, after checking that it answers and has the current schema."""
    engine = create_engine(_checked(url))
    try:
        yield engine
    finally:
        engine.dispose()


def _checked(url: str) -> str:
    """``url``, once it is valid, answers and has the current schema."""
    url = validate_url(url)
    check_connection(url)
    check_schema(url)
    return url


def _running(engine: sa.Engine, session_id: str) -> bool:
    with engine.connect() as conn:
        return commands.require_session(conn, session_id).status in ACTIVE_STATUSES
