"""Operator commands, one implementation each, shared by the executor, the URL-only admin
API, the CLI and :class:`RunEnqueuer`: plan a run, answer a call, interrupt, abort, cancel,
resume, fork, prune.

Each takes a connection pool on the helix database (``_store/pools.py``) and, when it must
reach a workflow, a :class:`~helix_dbos._client.workflows.Workflows` (this process's DBOS,
or a DBOSClient)::

    pool = create_pool(url)
    request = plan_run(pool, "researcher", "What is DBOS?")
    outcome = answer(pool, LocalWorkflows(url), "s1", ApprovalResponse(tool_call_id="t1", approved=True))

Planning, starting, resuming and answering survive a lost connection: their reads are run
again on a new connection, a start and an answer recognize their own earlier attempt
(:func:`start_run`, :func:`answer`), and a database that stays unreachable ends the call
with :class:`~helix_dbos.errors.DatabaseUnavailableError`, never the driver's error.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, TypeVar

import jsonschema
import psycopg
from dbos import error as dbos_errors
from pydantic import BaseModel, Field

from helix_dbos import _ids as ids
from helix_dbos.answers import ApprovalResponse, ClientToolResult, SubmitOutcome, ToolAnswer, answer_topic
from helix_dbos._client.workflows import ClientWorkflows, Workflows
from helix_dbos._durable.payloads import RunRequest, run_workflow_id
from helix_dbos._durable.run_claim import claim_run
from helix_dbos.errors import (
    HelixError,
    InvalidToolResultError,
    SessionBusyError,
    SessionNotFoundError,
    ToolCallNotPendingError,
)
from helix_dbos.events import AbortedEvent, ForkedEvent
from helix_dbos._logs import EventLog
from helix_dbos.observability import metrics
from helix_dbos.observability.tracing import trace_parent
from helix_dbos._store import reads, retention, tool_servers, writes
from helix_dbos._store.pools import Pool
from helix_dbos._store.records import (
    AnswerRecord,
    AnswerWindow,
    PendingToolCall,
    RunRecord,
    SessionRecord,
    TranscriptEntry,
    UsageSummary,
)
from helix_dbos._store.retention import Cutoff
from helix_dbos._store.retry import retry_or_unavailable, retry_or_unavailable_async
from helix_dbos._text import require_storable
from helix_dbos.types import ACTIVE_STATUSES, MessageAdapter, SessionStatus

T = TypeVar("T")

RESUMABLE_WORKFLOW_STATUSES = ("CANCELLED", "ERROR", "MAX_RECOVERY_ATTEMPTS_EXCEEDED")
"""DBOS workflow statuses that :func:`resume_workflow` restarts where they stopped."""


class RunControl(BaseModel):
    """What an operator command (:func:`cancel`, :func:`resume_workflow`, :func:`resume_on_queue`,
    :func:`move_to_version`, an interrupt) did to a session's latest run, or the new run it started."""

    session_id: str
    run: int
    workflow_id: str
    status: SessionStatus
    """The session's status afterwards."""
    changed: bool
    """False when there was nothing to do (the run had already ended by itself)."""
    enqueued_on: str | None = None
    """The queue a new run was enqueued on (a resume that needed a new run, a move)."""


class SessionDetail(BaseModel):
    """Everything an operator looks at for one session (see :func:`show_session`)."""

    session: SessionRecord
    transcript: list[TranscriptEntry] = Field(default_factory=list)
    state: dict[str, Any] = Field(default_factory=dict)
    runs: list[RunRecord] = Field(default_factory=list)
    """Each run with its DBOS workflow's status, executor id and application version."""
    pending: list[PendingToolCall] = Field(default_factory=list)
    answers: list[AnswerRecord] = Field(default_factory=list)
    usage: UsageSummary = Field(default_factory=UsageSummary)
    children: list[SessionRecord] = Field(default_factory=list)
    """Every sub-agent session below this one, depth first (``parent_session_id`` links them)."""
    forked_from: dict[str, Any] | None = None
    """``{"session_id", "step"}`` when the session was made by :func:`fork`."""
    tool_servers: dict[str, str] = Field(default_factory=dict)
    """The MCP server (toolset) of each tool its runs listed from one, by the tool's name."""


def session_detail(conn: psycopg.Connection[Any], session_id: str) -> SessionDetail:
    """Everything an operator looks at for one session (raises :class:`SessionNotFoundError`)."""
    return SessionDetail(
        session=require_session(conn, session_id),
        transcript=reads.transcript(conn, session_id),
        state=reads.load_state(conn, session_id),
        runs=reads.list_runs(conn, session_id),
        pending=reads.list_pending(conn, session_id),
        answers=reads.answers(conn, session_id),
        tool_servers=tool_servers.tool_servers(conn, session_id),
        usage=reads.usage_summary(conn, session_id),
        children=reads.list_descendant_sessions(conn, session_id),
        forked_from=reads.forked_from(conn, session_id),
    )


async def session_detail_async(conn: psycopg.AsyncConnection[Any], session_id: str) -> SessionDetail:
    """:func:`session_detail` over an async connection (``_store/reads.py``, its ``_async`` twins)."""
    require_storable("session_id", session_id)
    return SessionDetail(
        session=found_session(await reads.get_session_row_async(conn, session_id), session_id),
        transcript=await reads.transcript_async(conn, session_id),
        state=await reads.load_state_async(conn, session_id),
        runs=await reads.list_runs_async(conn, session_id),
        pending=await reads.list_pending_async(conn, session_id),
        answers=await reads.answers_async(conn, session_id),
        usage=await reads.usage_summary_async(conn, session_id),
        children=await reads.list_descendant_sessions_async(conn, session_id),
        forked_from=await reads.forked_from_async(conn, session_id),
        tool_servers=await tool_servers.tool_servers_async(conn, session_id),
    )


# --- starting runs --------------------------------------------------------------------------


def input_text(value: Any) -> str:
    """The user message of a run: a string, or anything JSON-serializable as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return json.dumps(value, separators=(",", ":"))


def plan_run(
    pool: Pool,
    agent_name: str,
    input: Any = None,
    session_id: str | None = None,
    kind: Literal["execute", "resume"] = "execute",
    owner: str | None = None,
) -> RunRequest:
    """The request for the session's next run, or the reason it cannot start now.

    ``execute`` starts a new session (``session_id`` None: a new time-ordered id,
    ``helix_dbos._ids``) or a new turn of one that is not running; ``resume`` continues
    one that stopped before completing. ``owner`` owns a new session; a session of
    another owner is not found. A session id or input Postgres cannot store is refused
    (:class:`UnstorableTextError`) before anything is written.
    """
    planning = RunPlanning(agent_name, input, session_id, kind, owner)
    row = retried_read(pool, lambda conn: reads.get_session_row(conn, planning.session_id), planning.reading)
    return planning.request(row)


class RunPlanning:
    """:func:`plan_run` around its one read, the session's row, which the caller makes
    (sync or async): the arguments are checked when made, the row by :meth:`request`::

        planning = RunPlanning("researcher", "What is DBOS?", "s1")
        request = planning.request(await live.session_row(planning.session_id))
    """

    def __init__(
        self, agent_name: str, input: Any = None, session_id: str | None = None,
        kind: Literal["execute", "resume"] = "execute", owner: str | None = None,
    ) -> None:
        if session_id is not None and not session_id.strip():
            raise HelixError("session_id must not be empty (leave it out to start a new session)")
        require_storable("session_id", session_id)
        require_storable("owner", owner)
        self.owner = owner
        self.user_text = input_text(input) if kind == "execute" else None
        require_storable("input", self.user_text)
        self.agent_name, self.kind = agent_name, kind
        self.session_id = session_id or ids.new_session_id()

    @property
    def reading(self) -> str:
        return f"reading session {self.session_id!r}"

    def request(self, row: SessionRecord | None) -> RunRequest:
        """The next run's request, given the session's row (None: a new session)."""
        session_id, agent_name = self.session_id, self.agent_name
        if row is None and self.kind == "resume" or row is not None and self.owner not in (None, row.owner):
            raise SessionNotFoundError(f"no session {session_id!r}")  # another owner's session is not there for this one
        if row is not None:
            if row.agent_name != agent_name:
                raise HelixError(f"session {session_id!r} belongs to agent {row.agent_name!r}, not {agent_name!r}")
            if row.status in ACTIVE_STATUSES:
                raise SessionBusyError(
                    f"session {session_id!r} already has a run in progress (run {row.run_count}, status {row.status})"
                )
            if self.kind == "resume" and row.status == SessionStatus.COMPLETED:
                raise HelixError(
                    f"session {session_id!r} is completed; call execute() with a new message to continue it"
                )
        run = (row.run_count if row else 0) + 1
        return RunRequest(
            session_id=session_id, run=run, agent_name=agent_name, kind=self.kind, input=self.user_text,
            owner=self.owner if row is None else None, trace_parent=trace_parent(),
        )


def claim_started_run(pool: Pool, request: RunRequest, initial_state: dict[str, Any] | None) -> None:
    """Claim the run whose workflow was just started or enqueued (``_durable/run_claim.py``,
    one statement: on the pool's autocommit connections, one round trip), so that the session
    and its run are committed when the start returns; a workflow
    that is not in helix's database raises :class:`ConfigurationError`, claiming nothing. Safe to repeat
    (the claim finds itself, or the run's own first transaction, done); a lost connection
    is retried."""

    def once() -> None:
        with pool.connection() as conn:  # autocommit: the one statement commits by itself
            claim_run(conn, request, initial_state)

    retry_or_unavailable(once, f"recording run {request.run} of session {request.session_id!r}")


FINISHING_SECONDS = 5.0
"""How long a start waits for the session's previous run's workflow to finish (see :func:`start_run`)."""


def busy(request: RunRequest) -> SessionBusyError:
    """The error for a run whose workflow id or session was taken by another caller."""
    return SessionBusyError(
        f"session {request.session_id!r} already has a run queued or in progress (run {request.run} was just started)"
    )


START_REFUSALS = (dbos_errors.DBOSWorkflowIDInUseError, dbos_errors.DBOSQueueDeduplicatedError)
"""What DBOS raises for a start whose workflow id (or queued session) is taken."""


def start_run(workflows: Workflows, request: RunRequest, start: Callable[[], T], *, wait: bool = True) -> T | None:
    """``start()``: start or enqueue the run ``request`` planned (:func:`plan_run`),
    refusing a workflow id that is taken (DBOS's ``"reject"`` policy), or raise
    :class:`SessionBusyError`; run again after a connection fault (:class:`RunStarting`
    decides).

    - A taken id or session means another caller started the session's run: busy. Only
      after a failed attempt, when the workflow holding the id was started with exactly
      ``request``, it is that attempt's own start whose answer was lost: None, and the
      caller hands out a handle on that workflow.
    - A queued run holds its session id as DBOS deduplication id until its workflow
      returns, a moment after its last commit ended the run for helix. ``plan_run`` saw
      the session not active, so a deduplication id still held belongs to an earlier run
      that is finishing: the start is tried again until it lets go, for up to
      :data:`FINISHING_SECONDS` (``wait`` False, in workflow code: not at all).
    - A database that stays unreachable raises :class:`~helix_dbos.errors.DatabaseUnavailableError`.
    """
    starting = RunStarting(request, wait)

    def attempt() -> T | None:
        while True:
            starting.attempts += 1
            try:
                return start()
            except START_REFUSALS as exc:
                if starting.attempts > 1 and workflows.run_request(request.workflow_id) == request:
                    return None
                pause = starting.pause_after(exc)
            time.sleep(pause)

    return retry_or_unavailable(attempt, starting.what)


async def start_run_async(
    request: RunRequest, start: Callable[[], Awaitable[T]], own: Callable[[], Awaitable[bool]], *, wait: bool = True
) -> T | None:
    """:func:`start_run` for async code: ``await start()``, with the same decisions
    (:class:`RunStarting`); ``own()`` says whether the workflow holding the run's id was
    started with exactly ``request``."""
    starting = RunStarting(request, wait)

    async def attempt() -> T | None:
        while True:
            starting.attempts += 1
            try:
                return await start()
            except START_REFUSALS as exc:
                if starting.attempts > 1 and await own():
                    return None
                pause = starting.pause_after(exc)
            await asyncio.sleep(pause)

    return await retry_or_unavailable_async(attempt, starting.what)


@dataclass
class RunStarting:
    """What :func:`start_run` and :func:`start_run_async` decide between attempts."""

    request: RunRequest
    wait: bool
    attempts: int = 0
    """Attempts made so far; after the first, a taken id may be an earlier attempt's own start."""
    deadline: float = field(default_factory=lambda: time.monotonic() + FINISHING_SECONDS)
    _pause: float = 0.01

    @property
    def what(self) -> str:
        return f"starting run {self.request.run} of session {self.request.session_id!r}"

    def pause_after(self, refusal: Exception) -> float:
        """Seconds to wait before trying a refused start again (the session's previous
        queued run is finishing), or :class:`SessionBusyError`."""
        finishing = isinstance(refusal, dbos_errors.DBOSQueueDeduplicatedError)
        if not (finishing and self.wait and time.monotonic() < self.deadline):
            raise busy(self.request) from None
        pause, self._pause = self._pause, min(self._pause * 2, 0.2)
        return pause


def retried_read(pool: Pool, fn: Callable[[psycopg.Connection[Any]], T], what: str) -> T:
    """``fn(conn)`` on a connection of ``pool``, run again on a new connection after a
    connection fault (a read is safe to repeat); ``what`` names it in the
    :class:`~helix_dbos.errors.DatabaseUnavailableError` of a database that stays unreachable."""

    def once() -> T:
        with pool.connection() as conn:
            return fn(conn)

    return retry_or_unavailable(once, what)


# --- answering gated calls -------------------------------------------------------------------


def answer(
    pool: Pool, workflows: Workflows, session_id: str, response: ToolAnswer, log: EventLog | None = None
) -> SubmitOutcome:
    """Validate an answer, record it (first answer wins) and deliver it to the waiting run.

    ``session_id`` is the session that made the call or its root session (a call of a
    sub-agent may be answered against the root). An answer is taken
    only before the call's deadline, by the database's clock, read under the call's row
    lock in the transaction that records it. Raises :class:`SessionNotFoundError`,
    :class:`ToolCallNotPendingError` (unknown, timed out, cancelled, or waiting for the
    other kind of answer), :class:`InvalidToolResultError` or :class:`UnstorableTextError`
    (text Postgres cannot store, in any field: nothing is recorded); a repeated answer
    returns ``status="already_answered"`` and changes nothing. ``log`` gets the events
    ``client_tool.submitted`` and ``client_tool.validation_failed``.

    The answer is recorded in a transaction of ``workflows``
    (:meth:`~helix_dbos._client.workflows.Workflows.transaction`), which sends DBOS's
    message to the run in the same commit; ``pool`` serves the reads before it.
    A lost connection is retried; an attempt whose commit went through although its
    connection broke is recognized by the next one, which returns ``accepted`` (see
    :class:`_AnswerRecording`). A database that stays unreachable raises
    :class:`~helix_dbos.errors.DatabaseUnavailableError`.
    """
    log = log or EventLog()
    require_storable("session_id", session_id)
    for name, value in response.model_dump(mode="json").items():
        require_storable(name, value)
    kind = "approval" if isinstance(response, ApprovalResponse) else "client"
    call_id = response.tool_call_id
    pending = retried_read(
        pool, lambda conn: _call_to_answer(conn, session_id, call_id), f"reading session {session_id!r}"
    )
    unknown = ToolCallNotPendingError(f"session {session_id!r} has no tool call {call_id!r} waiting for an answer")
    if pending is None:
        raise unknown
    if pending.kind != kind:
        wanted = "an approval" if pending.kind == "approval" else "a client result"
        raise ToolCallNotPendingError(f"tool call {call_id!r} ({pending.tool_name}) waits for {wanted}, not this")
    message = {"kind": kind, **response.model_dump(mode="json")}
    recording = _AnswerRecording(workflows, pending, response, message, unknown, log)
    answered_at = retry_or_unavailable(recording.attempt, f"answering tool call {call_id!r} of session {session_id!r}")
    if answered_at is not None:
        log.info(
            "client_tool.submitted", session_id=pending.session_id, tool_call_id=call_id, tool_name=pending.tool_name,
            kind=kind, wait_ms=round((answered_at - pending.requested_at).total_seconds() * 1000),
        )
    status: Literal["accepted", "already_answered"] = "accepted" if answered_at is not None else "already_answered"
    return SubmitOutcome(session_id=pending.session_id, tool_call_id=call_id, status=status)


def _call_to_answer(conn: psycopg.Connection[Any], session_id: str, call_id: str) -> PendingToolCall | None:
    """The gated call ``call_id`` of the session or of a sub-agent under it (None: no such
    call); :class:`SessionNotFoundError` for no such session."""
    if reads.get_session_row(conn, session_id) is None:
        raise SessionNotFoundError(f"no session {session_id!r}")
    return reads.get_pending_call(conn, session_id, call_id) or reads.find_pending_under_root(conn, session_id, call_id)


@dataclass
class _AnswerRecording:
    """Records and delivers one answer, one transaction per :meth:`attempt`.

    A commit whose connection breaks may still have gone through. Each attempt that
    reaches its commit notes the ``answered_at`` it writes, read under the call's row lock
    (the statement's time, to the microsecond). An attempt that finds the call answered
    with one of those times and this very message finds its own earlier commit, and
    reports it as taken rather than as ``already_answered``.
    """

    workflows: Workflows
    pending: PendingToolCall
    response: ToolAnswer
    message: dict[str, Any]
    unknown: ToolCallNotPendingError
    log: EventLog
    committing: list[datetime] = field(default_factory=list)
    """The ``answered_at`` of every attempt that reached its commit."""

    def attempt(self) -> datetime | None:
        """Record the answer and send it to the run; when it was taken (by this call, in
        this attempt or an earlier one), or None when an earlier answer stands."""
        session_id, call_id = self.pending.session_id, self.pending.tool_call_id
        with self.workflows.transaction() as transaction:
            # The deadline check, the audit row and the message that delivers it are one
            # transaction under the call's row lock: all of them, or none.
            conn = transaction.conn
            window = writes.lock_call_for_answer(conn, session_id, call_id)
            if window is None:
                raise self.unknown
            if window.answered:
                return self._own_answer(conn)
            refusal = _refusal(self.pending, window)
            if refusal is not None:
                raise ToolCallNotPendingError(refusal)
            if isinstance(self.response, ClientToolResult):
                _validate_client_result(self.response, self.pending, self.log)
            kind = self.message["kind"]
            if not writes.record_answer(conn, session_id, call_id, kind, self.message, answered_at=window.now):
                return None
            if reads.workflow_exists(conn, self.pending.workflow_id):
                # Before its waiter exists (the run still runs the step's other calls), the
                # recorded answer is all it takes: the waiter's first look finds it.
                key = f"helix:{session_id}:{call_id}"
                transaction.send(self.pending.workflow_id, self.message, answer_topic(self.pending.step), key)
            self.committing.append(window.now)  # past this line only the commit can fail
        return window.now

    def _own_answer(self, conn: psycopg.Connection[Any]) -> datetime | None:
        """The recorded answer's ``answered_at`` when an earlier attempt of this call
        committed it, else None."""
        if not self.committing:
            return None
        recorded = next(
            (a for a in reads.answers(conn, self.pending.session_id) if a.tool_call_id == self.pending.tool_call_id),
            None,
        )
        if recorded is None or recorded.answered_at not in self.committing or recorded.answer != self.message:
            return None
        return recorded.answered_at


def _refusal(pending: PendingToolCall, window: AnswerWindow) -> str | None:
    """Why the call cannot take an answer now (it timed out, or was cancelled), or None."""
    if window.status == "pending" and not window.expired:
        return None
    if window.status == "cancelled":
        how = "was cancelled with its run"
    else:
        deadline = f" at its deadline {window.deadline.isoformat(timespec='seconds')}" if window.deadline else ""
        how = f"timed out{deadline}"
    return f"tool call {pending.tool_call_id!r} ({pending.tool_name}) is no longer waiting for an answer: it {how}"


def _validate_client_result(response: ClientToolResult, pending: PendingToolCall, log: EventLog) -> None:
    if response.error is not None or pending.output_schema is None:
        return
    try:
        jsonschema.validate(response.result, pending.output_schema)
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "the result"
        log.warning(
            "client_tool.validation_failed", session_id=pending.session_id, tool_call_id=pending.tool_call_id,
            tool_name=pending.tool_name, path=where, error=exc.message,
        )
        raise InvalidToolResultError(
            f"client result for tool call {response.tool_call_id!r} does not match the tool's output schema"
            f" at {where}: {exc.message}"
        ) from None


# --- stopping runs ---------------------------------------------------------------------------


def interrupt(pool: Pool, session_id: str) -> bool:
    """Ask a running session (and its running sub-agents) to stop after the current step."""
    with pool.connection() as conn, conn.transaction():
        require_session(conn, session_id)
        return any([writes.request_interrupt(conn, sid) for sid in reads.active_tree(conn, session_id)])


async def interrupt_async(conn: psycopg.AsyncConnection[Any], session_id: str) -> bool:
    """:func:`interrupt` over an async connection, in one transaction."""
    require_storable("session_id", session_id)
    async with conn.transaction():
        found_session(await reads.get_session_row_async(conn, session_id), session_id)
        return any([await writes.request_interrupt_async(conn, sid) for sid in await reads.active_tree_async(conn, session_id)])


def abort(pool: Pool, workflows: Workflows, session_id: str, reason: str) -> bool:
    """Cancel the run in progress of ``session_id`` and of its running descendants, parents
    first, and end each ``aborted``. True when at least one run was ended."""
    require_storable("reason", reason)
    with pool.connection() as conn:
        require_session(conn, session_id)
        running = [row for sid in reads.active_tree(conn, session_id) if (row := reads.get_session_row(conn, sid))]
    aborted = False
    for row in running:
        with pool.connection() as conn, conn.transaction():
            ended = writes.end_run(
                conn, session_id=row.session_id, run=row.run_count, status="aborted", error=reason,
                stop_reason="aborted", event=AbortedEvent(reason=reason),
            )
            workflow_id = reads.run_workflow(conn, row.session_id, row.run_count)
        if workflow_id is not None:
            workflows.cancel(workflow_id)
        if ended:
            metrics.run_ended(row.agent_name, "aborted")
        aborted |= ended
    return aborted


def cancel(pool: Pool, workflows: Workflows, session_id: str, reason: str) -> RunControl:
    """:func:`abort` for an operator: refuses a session with no run in progress, and reports."""
    with pool.connection() as conn:
        row = require_session(conn, session_id)
    if row.status not in ACTIVE_STATUSES:
        raise not_running(row)
    ended = abort(pool, workflows, session_id, reason)
    with pool.connection() as conn:
        status = require_session(conn, session_id).status
        workflow_id = reads.run_workflow(conn, session_id, row.run_count) or run_workflow_id(session_id, row.run_count)
    return RunControl(session_id=session_id, run=row.run_count, workflow_id=workflow_id, status=status, changed=ended)


def resumes_in_place(pool: Pool, workflows: Workflows, session_id: str) -> bool:
    """Whether resuming the session continues its latest run's own workflow rather than
    starting a new run: it was aborted (DBOS cancelled it). Its replay reuses the model's
    checkpointed calls, and so the outcomes its tools recorded (``helix.tool_outcomes``):
    a tool that finished after the abort is not run again, whatever the model would say
    if asked anew."""
    row, workflow_id = _latest_run(pool, session_id)
    if row.status != SessionStatus.ABORTED or workflow_id is None:
        return False
    return workflows.status(workflow_id) == "CANCELLED"


def resume_workflow(pool: Pool, workflows: Workflows, session_id: str) -> RunControl:
    """Restart the workflow of the session's latest run where it stopped, when DBOS
    cancelled it or it ended in an error. The run becomes active again (or waits again for
    its pending calls): DBOS's status change does that, through helix's trigger
    (``_store/dbos_tables.py``), exactly as when ``dbos workflow resume`` does it."""
    row, workflow_id = _latest_run(pool, session_id)
    workflow_status = workflows.status(workflow_id) if workflow_id else None
    if workflow_id is None or workflow_status not in RESUMABLE_WORKFLOW_STATUSES:
        raise HelixError(_not_resumable(row, workflow_status))
    workflows.resume(workflow_id)
    status = retried_read(
        pool, lambda conn: require_session(conn, session_id).status, f"reading session {session_id!r}"
    )
    return RunControl(session_id=session_id, run=row.run_count, workflow_id=workflow_id, status=status, changed=True)


def resume_on_queue(pool: Pool, workflows: ClientWorkflows, session_id: str, queue: str) -> RunControl:
    """Resume a stopped session from any process, as ``executor.resume`` does: an aborted
    run's own workflow continues where it stopped (:func:`resumes_in_place`); an
    interrupted, failed or forked session gets a new run (``resume``, from its last
    committed step), enqueued on ``queue`` for the workers of its application that listen
    there (the newest version's, as DBOS hands out a workflow enqueued without one). The
    new run is claimed before this returns, so the session is active at once."""
    require_storable("queue", queue)
    if resumes_in_place(pool, workflows, session_id):
        return resume_workflow(pool, workflows, session_id)
    row, runs = retried_read(
        pool, lambda conn: (require_session(conn, session_id), reads.list_runs(conn, session_id)),
        f"reading session {session_id!r}",
    )
    request = plan_run(pool, row.agent_name, session_id=session_id, kind="resume")
    application = runs[-1].application_name if runs else None
    workflow_id = run_workflow_id(session_id, request.run)
    start_run(workflows, request, lambda: workflows.enqueue(
        request, workflow_id, queue, None, application_name=application
    ))
    claim_started_run(pool, request, None)
    return RunControl(session_id=session_id, run=request.run, workflow_id=workflow_id, status=SessionStatus.ACTIVE,
                      changed=True, enqueued_on=queue)


def _latest_run(pool: Pool, session_id: str) -> tuple[SessionRecord, str | None]:
    """The session's row and the workflow that holds its latest run (None: no run yet)."""

    def latest(conn: psycopg.Connection[Any]) -> tuple[SessionRecord, str | None]:
        row = require_session(conn, session_id)
        return row, reads.run_workflow(conn, session_id, row.run_count)

    return retried_read(pool, latest, f"reading session {session_id!r}")


def _not_resumable(row: SessionRecord, workflow_status: str | None) -> str:
    sid, agent = row.session_id, row.agent_name
    if row.status in ACTIVE_STATUSES and workflow_status in ("PENDING", "ENQUEUED", "DELAYED"):
        return f"session {sid!r} is running (run {row.run_count}, status {row.status}); nothing to resume"
    if row.status == SessionStatus.COMPLETED:
        return f"session {sid!r} is completed; continue it with executor.execute({agent!r}, <message>, session_id={sid!r})"
    if row.status in (SessionStatus.INTERRUPTED, SessionStatus.FAILED, SessionStatus.ABORTED):
        return (
            f"session {sid!r} is {row.status}: it needs a new run, which a worker that registered agent"
            f" {agent!r} starts: executor.resume({agent!r}, {sid!r}), or enqueue it for the workers of a queue:"
            f" helix-dbos resume {sid} --queue QUEUE"
        )
    return (
        f"session {sid!r} (status {row.status}) has no cancelled or failed workflow to resume"
        f" (workflow status {workflow_status})"
    )


def move_to_version(
    pool: Pool, workflows: ClientWorkflows, session_id: str, version: str, queue: str
) -> RunControl:
    """Move a run stranded on an application version no process runs any more (a deploy
    changed it) to ``version``: its workflow is cancelled and a new run of the session
    (``resume``) is enqueued on ``queue`` for the workers of ``version``. The new run
    starts from the last committed step; what the stranded run did in its unfinished step
    (a tool in flight, an answer not yet committed) is done again."""
    require_storable("version", version)
    require_storable("queue", queue)
    row, runs = retried_read(
        pool, lambda conn: (require_session(conn, session_id), reads.list_runs(conn, session_id)),
        f"reading session {session_id!r}",
    )
    current = runs[-1] if runs else None
    if row.status not in ACTIVE_STATUSES or current is None or current.workflow_status not in ("PENDING", "ENQUEUED"):
        raise HelixError(f"session {session_id!r} has no run waiting to be recovered (status {row.status})")
    if current.application_version == version:
        raise HelixError(f"run {current.run} of session {session_id!r} is already on version {version!r}")
    workflows.cancel(current.workflow_id)  # helix's trigger ends the run, aborted
    request = plan_run(pool, row.agent_name, session_id=session_id, kind="resume")
    workflow_id = run_workflow_id(session_id, request.run)
    start_run(workflows, request, lambda: workflows.enqueue(
        request, workflow_id, queue, None, app_version=version, application_name=current.application_name
    ))
    return RunControl(session_id=session_id, run=request.run, workflow_id=workflow_id, status=SessionStatus.ACTIVE,
                      changed=True, enqueued_on=queue)


# --- forking ---------------------------------------------------------------------------------


def fork(pool: Pool, session_id: str, from_step: int, new_session_id: str | None = None) -> SessionRecord:
    """A new session whose transcript and state are those of ``session_id`` after step
    ``from_step``.

    The fork gets the source's messages of steps ``<= from_step`` (what the source's step
    ``from_step + 1`` was given, including the input of a run that started there) and its
    state and patch log up to that step, with the same step numbers, so step budgets and
    ``state_at`` agree with the source. Usage and events are not copied; its first event,
    ``forked``, names the source. Its status is ``interrupted``: a worker that registered
    the agent continues it with ``executor.resume(agent, new_id)``.
    """
    require_storable("new_session_id", new_session_id)
    new_id = new_session_id or ids.new_session_id()
    with pool.connection() as conn, conn.transaction():
        row = require_session(conn, session_id)
        if not 0 <= from_step <= row.step_count:
            raise HelixError(f"session {session_id!r} has steps 0 to {row.step_count}; cannot fork from step {from_step}")
        if reads.get_session_row(conn, new_id) is not None:
            raise HelixError(f"a session {new_id!r} already exists")
        writes.fork_session(conn, session_id, new_id, from_step)
        writes.append_events(conn, new_id, 0, from_step, [ForkedEvent(source_session_id=session_id, from_step=from_step)])
        created = reads.get_session_row(conn, new_id)
        assert created is not None
        return created


def get_session(conn: psycopg.Connection[Any], session_id: str, at_step: int | None = None) -> SessionRecord:
    """The session with its transcript, state (as of ``at_step``, default the latest) and
    its own pending calls; :class:`SessionNotFoundError`, or a :class:`HelixError` for a
    step it does not have."""
    row = require_step(require_session(conn, session_id), at_step)
    row.messages = reads.load_messages(conn, session_id)
    row.state = reads.load_state(conn, session_id, at_step)
    row.pending = reads.list_pending(conn, session_id, include_descendants=False)
    return row


async def get_session_async(
    conn: psycopg.AsyncConnection[Any], session_id: str, at_step: int | None = None
) -> SessionRecord:
    """:func:`get_session` over an async connection."""
    row = require_step(await require_session_async(conn, session_id), at_step)
    transcript = await reads.transcript_async(conn, session_id)
    row.state = await reads.load_state_async(conn, session_id, at_step)
    row.pending = await reads.list_pending_async(conn, session_id, include_descendants=False)
    row.messages = [MessageAdapter.validate_python(entry.message) for entry in transcript]
    return row


def require_step(row: SessionRecord, step: int | None) -> SessionRecord:
    """``row``, when the session has step ``step`` (None: any session does), else a :class:`HelixError`."""
    if step is not None and not 0 <= step <= row.step_count:
        raise HelixError(f"session {row.session_id!r} has steps 0 to {row.step_count}; there is no step {step}")
    return row


def not_running(row: SessionRecord) -> HelixError:
    """The error for an operator command that needs a run in progress and found none."""
    return HelixError(f"session {row.session_id!r} has no run in progress (status {row.status})")


def latest_workflow_id(pool: Pool, row: SessionRecord) -> str:
    """The workflow that holds the session's latest run now (its run workflow's id before it began)."""
    with pool.connection() as conn:
        found = reads.run_workflow(conn, row.session_id, row.run_count)
    return found or run_workflow_id(row.session_id, row.run_count)


async def require_session_async(conn: psycopg.AsyncConnection[Any], session_id: str) -> SessionRecord:
    """:func:`require_session` over an async connection."""
    require_storable("session_id", session_id)
    return found_session(await reads.get_session_row_async(conn, session_id), session_id)


def require_session(conn: psycopg.Connection[Any], session_id: str) -> SessionRecord:
    """The session's row, or :class:`SessionNotFoundError` (a clear error for an unstorable id too)."""
    require_storable("session_id", session_id)
    return found_session(reads.get_session_row(conn, session_id), session_id)


def found_session(row: SessionRecord | None, session_id: str) -> SessionRecord:
    """``row``, read for ``session_id``, or :class:`SessionNotFoundError` when there was none."""
    if row is None:
        raise SessionNotFoundError(f"no session {session_id!r}")
    return row


# --- retention -------------------------------------------------------------------------------


class PruneReport(BaseModel):
    """What :func:`prune` removed (or, in a dry run, would remove)."""

    dry_run: bool
    roots: list[str]
    """The root session of every tree removed, oldest first."""
    sessions: int
    """Sessions removed, sub-agent sessions included."""
    workflows: int
    """DBOS workflows removed (one per run)."""
    batches: int


def prune(pool: Pool, workflows: Workflows, cutoff: Cutoff, *, dry_run: bool = False,
          batch_size: int = 100) -> PruneReport:
    """Remove finished sessions, each with its whole sub-agent tree, and their DBOS
    workflows, ``batch_size`` trees per transaction (see ``_store/retention.py`` for what
    counts as finished). A tree's rows stay locked while its workflows are deleted (through
    DBOS) and then its helix rows, so no one resumes a session half removed; a crash in
    between leaves the tree to the next prune. A dry run reports every tree that would go
    and removes nothing."""
    if batch_size < 1:
        raise HelixError(f"batch size must be at least 1, got {batch_size}")
    if dry_run:
        with pool.connection() as conn:
            roots = retention.finished_trees(conn, cutoff, limit=None)
            sessions, ids = retention.tree_sizes(conn, roots), retention.tree_workflow_ids(conn, roots)
        return PruneReport(dry_run=True, roots=roots, sessions=sessions, workflows=len(ids),
                           batches=-(-len(roots) // batch_size))
    roots = []
    sessions = removed_workflows = batches = 0
    while True:
        with pool.connection() as conn, conn.transaction():
            batch = retention.finished_trees(conn, cutoff, batch_size)
            if not batch:
                break
            ids = retention.tree_workflow_ids(conn, batch)
            workflows.delete(ids)
            sessions += retention.delete_trees(conn, batch)
        roots += batch
        removed_workflows += len(ids)
        batches += 1
        if len(batch) < batch_size:
            break
    return PruneReport(dry_run=False, roots=roots, sessions=sessions, workflows=removed_workflows, batches=batches)
