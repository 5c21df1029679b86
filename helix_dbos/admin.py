"""The operator API: inspect sessions and answer, interrupt, abort, resume, fork, move or
prune them from any process, with nothing but the database URL.

No agent is imported and DBOS is not launched. Reads go to the ``helix`` schema; what must
reach a workflow (an answer, an abort, a resume) goes through a ``DBOSClient``. Each
operation runs the same command as the executor's method of the same name, and the
``helix-dbos`` CLI is a thin shell over them (the table in the operations guide lists
every operation in each form).

An operator tool that makes more than one call holds a client: :class:`AdminClient`
keeps one connection pool and one DBOS client for its lifetime, and
:class:`AsyncAdminClient` is the same for async code (its reads go over a pool of async
connections, without a thread)::

    from helix_dbos.admin import AdminClient

    with AdminClient(url) as admin:
        for call in admin.list_pending():
            print(call.session_id, call.tool_call_id, call.tool_name, call.input)
        admin.approve("s1", "call_1", approver="ana")
        admin.deny("s1", "call_2", reason="too expensive")
        admin.interrupt("s2")

The module functions are one-shot forms of the same operations, each with its ``*_async``
twin beside it; each opens a client for the call and closes it::

    from helix_dbos import admin

    admin.approve(url, "s1", "call_1", approver="ana")
    detail = await admin.show_session_async(url, "s1")

Every operation raises a :class:`~helix_dbos.errors.HelixError` with a message that says
what to do: no such session, not pending, an invalid result, a schema that needs
``helix-dbos migrate``. None of them migrates or starts a database. A client checks the
connection and the schema when it opens and fails at once with a
:class:`~helix_dbos.errors.DatabaseError`; past that check, answering, resuming and
moving a run retry a lost connection, and raise
:class:`~helix_dbos.errors.DatabaseUnavailableError` when the database stays unreachable.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, TypeVar

from helix_dbos._client import commands
from helix_dbos._client.commands import PruneReport, RunControl, SessionDetail
from helix_dbos._client.live import LiveStreams
from helix_dbos._client.queues import DEFAULT_QUEUE
from helix_dbos._client.streams import follow_events, follow_events_async
from helix_dbos._client.workflows import ClientWorkflows
from helix_dbos._database import check_connection, validate_url
from helix_dbos._deltas import DeltaRecord
from helix_dbos._store import reads
from helix_dbos._store import workers as workers_store
from helix_dbos._store.migrations import check_schema
from helix_dbos._store.pools import create_pool
from helix_dbos._store.records import (
    AnswerRecord,
    EventRecord,
    PendingToolCall,
    RunRecord,
    SessionRecord,
    UsageSummary,
)
from helix_dbos._store.retention import Cutoff
from helix_dbos._store.workers import WorkerRecord
from helix_dbos._text import require_storable
from helix_dbos.answers import ApprovalResponse, ClientToolResult, SubmitOutcome, ToolAnswer
from helix_dbos.events import RUN_END_EVENTS
from helix_dbos.memory import Memory, MemoryHit, MemoryStore, Namespace, SearchMode
from helix_dbos.types import ACTIVE_STATUSES

__all__ = [
    "AdminClient",
    "AnswerRecord",
    "AsyncAdminClient",
    "PruneReport",
    "RunControl",
    "SessionDetail",
    "WorkerStatus",
    "abort",
    "abort_async",
    "approve",
    "approve_async",
    "cancel",
    "cancel_async",
    "deny",
    "deny_async",
    "erase_memories",
    "erase_memories_async",
    "forget_memory",
    "forget_memory_async",
    "fork",
    "fork_async",
    "get_current_run",
    "get_current_run_async",
    "get_memory",
    "get_memory_async",
    "get_session",
    "get_session_async",
    "get_usage",
    "get_usage_async",
    "interrupt",
    "interrupt_async",
    "list_memories",
    "list_memories_async",
    "list_pending",
    "list_pending_async",
    "list_runs",
    "list_runs_async",
    "list_sessions",
    "list_sessions_async",
    "list_workers",
    "list_workers_async",
    "move",
    "move_async",
    "prune",
    "prune_async",
    "resume",
    "resume_async",
    "retry_failed_memories",
    "retry_failed_memories_async",
    "search_memories",
    "search_memories_async",
    "show_session",
    "show_session_async",
    "state_at",
    "state_at_async",
    "stream",
    "stream_async",
    "submit",
    "submit_async",
    "submit_tool_result",
    "submit_tool_result_async",
    "tail",
]

T = TypeVar("T")

ABORTED_BY_OPERATOR = "aborted by an operator"
"""The reason an operator's :meth:`AdminClient.abort` records when it is given none."""


@dataclass(frozen=True)
class WorkerStatus:
    """A process that runs (or ran) helix workflows, as ``helix-dbos workers`` shows it.

    Attributes:
        executor_id: The DBOS executor id the process runs under.
        status: ``live``, ``draining``, ``dead`` (its lease expired and nobody adopted it
            yet), ``released`` (it stopped and handed its runs back), ``adopted`` (another
            process handed its runs back), or ``unknown`` (PENDING runs under an executor id
            that never kept a lease: ``helix-dbos recover --executor ID`` hands them back).
        application_version: The DBOS application version it runs.
        host: The host it runs on (None for ``unknown``).
        pid: Its process id on that host.
        queues: The queues it takes runs from (None: it said none).
        started_at: When it took its lease.
        last_seen: When it last renewed its lease.
        pending_runs: Its workflows DBOS still holds PENDING (running, or waiting for a person).
        adopted_by: The executor id of the process that adopted its runs, if one did.
        adopted_runs: How many runs that process handed back.
        note: What ``helix-dbos workers`` says of it, in words.
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
    adopted_by: str | None = None
    adopted_runs: int | None = None
    note: str = ""


# --- the client -----------------------------------------------------------------------------


class AdminClient:
    """Every operator operation over one connection pool and one DBOS client.

    Opening it checks that ``url`` answers and has the current schema (three short
    connections, once); after that each read takes a pooled connection, and what must
    reach a workflow goes through the client's one ``DBOSClient`` (made on first use).
    Use it as a context manager, or call :meth:`close`::

        with AdminClient(url) as admin:
            for session in admin.list_sessions(status="awaiting_approval"):
                print(session.session_id, admin.list_pending(session.session_id))

    Args:
        url: The Postgres URL of the DBOS system database that holds helix's schema.

    Raises:
        DatabaseError: ``url`` is invalid or does not answer, or its schema is missing or
            older than this package (run ``helix-dbos migrate``).
    """

    def __init__(self, url: str) -> None:
        self.url = _checked_url(url)
        self._pool = create_pool(self.url)
        self._workflows = ClientWorkflows(self.url)
        self._memory: MemoryStore | None = None

    # --- lifetime ---

    def close(self) -> None:
        """Close the pool and the DBOS client; the client cannot be used afterwards."""
        self._workflows.close()
        self._pool.close()

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # --- reading ---

    def list_sessions(self, limit: int = 50, status: str | None = None) -> list[SessionRecord]:
        """Sessions, the most recently updated first (rows only: no transcript or state).

        Args:
            limit: At most this many sessions.
            status: Only sessions with this status (``"awaiting_approval"``, ...).

        Returns:
            The session rows.
        """
        require_storable("status", status)
        with self._pool.connection() as conn:
            return reads.list_sessions(conn, limit=limit, status=status)

    def get_session(self, session_id: str, at_step: int | None = None) -> SessionRecord:
        """The session with its transcript, state and pending calls, as the executor's
        ``get_session`` returns it.

        Args:
            session_id: The session.
            at_step: Give the state as it was after this step (default: the latest).

        Returns:
            The session row with ``messages``, ``state`` and ``pending`` loaded.

        Raises:
            SessionNotFoundError: There is no such session.
            HelixError: The session has no step ``at_step``.
        """
        with self._pool.connection() as conn:
            return commands.get_session(conn, session_id, at_step)

    def show_session(self, session_id: str) -> SessionDetail:
        """Everything an operator looks at for one session.

        Args:
            session_id: The session.

        Returns:
            The session with its transcript, state, runs, pending calls (its
            sub-sessions' too), answers, usage and child sessions.

        Raises:
            SessionNotFoundError: There is no such session.
        """
        with self._pool.connection() as conn:
            return commands.session_detail(conn, session_id)

    def list_runs(self, session_id: str) -> list[RunRecord]:
        """Every run of the session, oldest first, each with its DBOS workflow's status.

        Args:
            session_id: The session.

        Returns:
            The session's runs.

        Raises:
            SessionNotFoundError: There is no such session.
        """
        with self._pool.connection() as conn:
            commands.require_session(conn, session_id)
            return reads.list_runs(conn, session_id)

    def get_current_run(self, session_id: str) -> RunRecord | None:
        """The session's latest run.

        Args:
            session_id: The session.

        Returns:
            The latest run, or None for a session without runs (a fork not yet resumed).

        Raises:
            SessionNotFoundError: There is no such session.
        """
        runs = self.list_runs(session_id)
        return runs[-1] if runs else None

    def state_at(self, session_id: str, step: int | None = None) -> dict[str, Any]:
        """The custom state after a step, rebuilt from the patch log.

        Args:
            session_id: The session.
            step: The step (default: the latest).

        Returns:
            The state.

        Raises:
            SessionNotFoundError: There is no such session.
            HelixError: The session has no step ``step``.
        """
        with self._pool.connection() as conn:
            row = commands.require_session(conn, session_id)
            commands.require_step(row, step)
            return reads.load_state(conn, session_id, step)

    def get_usage(self, session_id: str) -> UsageSummary:
        """The session's usage, summed by source and by tool or model name.

        Args:
            session_id: The session.

        Returns:
            The summed usage.

        Raises:
            SessionNotFoundError: There is no such session.
        """
        with self._pool.connection() as conn:
            commands.require_session(conn, session_id)
            return reads.usage_summary(conn, session_id)

    def list_pending(self, session_id: str | None = None) -> list[PendingToolCall]:
        """Calls waiting for an answer.

        Args:
            session_id: Only this session's calls, with the calls of its sub-sessions
                (default: every session's).

        Returns:
            The pending calls, oldest first.

        Raises:
            SessionNotFoundError: There is no session ``session_id``.
        """
        with self._pool.connection() as conn:
            if session_id is not None:
                commands.require_session(conn, session_id)
            return reads.list_pending(conn, session_id)

    def stream(
        self, session_id: str, from_seq: int = 0, follow: bool = True, deltas: bool = False
    ) -> Iterator[EventRecord | DeltaRecord]:
        """The session's durable events, and with ``deltas`` the token deltas published
        while following::

            for item in admin.stream("s1", follow=False):
                print(item.seq, item.type)

        Args:
            session_id: The session.
            from_seq: The first event to yield.
            follow: Keep yielding events as they are written until the session has no
                run in progress (at once, after the events already written, for a
                session that is not running). Without it, only the events already written.
            deltas: Also yield the token deltas (:class:`DeltaRecord`, no ``seq``)
                published while following.

        Returns:
            An iterator over the events (and deltas).

        Raises:
            SessionNotFoundError: There is no such session (raised by this call, not at
                the first ``next()``).
        """
        with self._pool.connection() as conn:
            commands.require_session(conn, session_id)
        return self._stream(session_id, from_seq, follow, deltas)

    def _stream(
        self, session_id: str, from_seq: int, follow: bool, deltas: bool
    ) -> Iterator[EventRecord | DeltaRecord]:
        follow = follow and self._running(session_id)
        items = follow_events(
            self.url, session_id, from_seq, pool=self._pool, follow=follow, until_run_end=False, deltas=deltas
        )
        for event in items:
            yield event
            # A run's end event commits with the run's final status, so the status read
            # now is at least that new; a resumed or newer run keeps the stream going.
            if follow and event.type in RUN_END_EVENTS and not self._running(session_id):
                return

    def _running(self, session_id: str) -> bool:
        with self._pool.connection() as conn:
            return commands.require_session(conn, session_id).status in ACTIVE_STATUSES

    def list_workers(self) -> list[WorkerStatus]:
        """Every worker lease with its PENDING runs, then executors without a lease that
        still hold PENDING runs; the most recently seen first.

        Returns:
            One :class:`WorkerStatus` per process.
        """
        with self._pool.connection() as conn:
            leases = workers_store.list_workers(conn)
        pending = self._workflows.client.list_workflows(status="PENDING", load_input=False, load_output=False)
        return _worker_statuses(leases, pending)

    # --- answering ---

    def submit_tool_result(self, session_id: str, answer: ToolAnswer) -> SubmitOutcome:
        """Answer a pending call, as the executor's ``submit_tool_result`` does.

        Args:
            session_id: The session whose call it is.
            answer: An :class:`ApprovalResponse` or a :class:`ClientToolResult`.

        Returns:
            The outcome; ``status="already_answered"`` means an earlier answer stands and
            nothing changed.

        Raises:
            SessionNotFoundError: There is no such session.
            ToolCallNotPendingError: The call is unknown, timed out, was cancelled with
                its run, or takes the other kind of answer.
            InvalidToolResultError: A client result does not match the tool's output schema.
        """
        return commands.answer(self._pool, self._workflows, session_id, answer)

    def approve(
        self, session_id: str, tool_call_id: str, reason: str | None = None, approver: str | None = None
    ) -> SubmitOutcome:
        """Approve a gated call: the tool runs with its original input.

        Args:
            session_id: The session whose call it is.
            tool_call_id: The call.
            reason: Why (kept in the audit row).
            approver: Who approves (kept in the audit row).

        Returns:
            The outcome, as :meth:`submit_tool_result` returns it.

        Raises:
            SessionNotFoundError: There is no such session.
            ToolCallNotPendingError: The call is not waiting for an approval.
        """
        response = ApprovalResponse(tool_call_id=tool_call_id, approved=True, reason=reason, approver=approver)
        return self.submit_tool_result(session_id, response)

    def deny(self, session_id: str, tool_call_id: str, reason: str, approver: str | None = None) -> SubmitOutcome:
        """Deny a gated call: the tool never runs; the model reads ``Tool call X was not
        approved by the user: <reason>`` as its result.

        Args:
            session_id: The session whose call it is.
            tool_call_id: The call.
            reason: Why; the model reads it.
            approver: Who denies (kept in the audit row).

        Returns:
            The outcome, as :meth:`submit_tool_result` returns it.

        Raises:
            SessionNotFoundError: There is no such session.
            ToolCallNotPendingError: The call is not waiting for an approval.
        """
        response = ApprovalResponse(tool_call_id=tool_call_id, approved=False, reason=reason, approver=approver)
        return self.submit_tool_result(session_id, response)

    def submit(
        self, session_id: str, tool_call_id: str, result: Any = None, error: str | None = None
    ) -> SubmitOutcome:
        """Give a client-executed call its result or its error.

        Args:
            session_id: The session whose call it is.
            tool_call_id: The call.
            result: The tool's result (checked against the tool's output schema).
            error: The tool's error message, instead of a result.

        Returns:
            The outcome, as :meth:`submit_tool_result` returns it.

        Raises:
            SessionNotFoundError: There is no such session.
            ToolCallNotPendingError: The call is not waiting for a client's result.
            InvalidToolResultError: ``result`` does not match the tool's output schema.
        """
        return self.submit_tool_result(session_id, ClientToolResult(tool_call_id=tool_call_id, result=result, error=error))

    # --- controlling runs ---

    def interrupt(self, session_id: str) -> RunControl:
        """Ask the session's run in progress (and its running sub-agents) to stop after
        the current step; the session becomes ``interrupted`` and :meth:`resume` (or the
        executor's ``resume``) continues it.

        This is the executor's ``interrupt``: one durable write, which the run reads at
        its next step boundary whichever process runs it.

        Args:
            session_id: The session.

        Returns:
            What was asked: ``status`` is the session's status now (still running until
            the step ends).

        Raises:
            SessionNotFoundError: There is no such session.
            HelixError: The session has no run in progress.
        """
        if not commands.interrupt(self._pool, session_id):
            raise commands.not_running(self._require(session_id))
        return self._control(session_id)

    def abort(self, session_id: str, reason: str = ABORTED_BY_OPERATOR) -> RunControl:
        """Abort the session's run in progress now (and its sub-agents'): its workflow is
        cancelled, the run ends ``aborted`` and its pending calls are cancelled with it.
        :meth:`resume` continues it where it stopped.

        Args:
            session_id: The session.
            reason: Recorded as the run's error.

        Returns:
            What was done; ``changed`` is False when the run had ended by itself meanwhile.

        Raises:
            SessionNotFoundError: There is no such session.
            HelixError: The session has no run in progress.
        """
        return commands.cancel(self._pool, self._workflows, session_id, reason)

    def resume(self, session_id: str, queue: str | None = None) -> RunControl:
        """Resume a stopped session where it stopped, as the executor's ``resume`` does.

        Without ``queue``, the latest run's own workflow continues where it stopped, when
        DBOS cancelled it (an abort, ``dbos workflow cancel``) or it ended in an error: the
        run becomes active again (or waits again for its pending calls) and any process
        that runs DBOS with the same application version picks it up.

        With ``queue``, an aborted run continues the same way, and an interrupted, failed
        or forked session gets a new run from its last committed step, enqueued on
        ``queue`` for the workers that listen there (a new run needs a process that
        registered the agent; this process has none)::

            admin.resume("s1", queue="agents")

        Args:
            session_id: The session.
            queue: Enqueue a new run here when the session needs one.

        Returns:
            What was done: the run resumed, or the new run.

        Raises:
            SessionNotFoundError: There is no such session.
            SessionBusyError: The session has a run in progress.
            HelixError: Nothing can be resumed (a completed session; without ``queue``, a
                session that needs a new run): the message says what to run instead.
        """
        if queue is None:
            return commands.resume_workflow(self._pool, self._workflows, session_id)
        return commands.resume_on_queue(self._pool, self._workflows, session_id, queue)

    def move(self, session_id: str, version: str, queue: str = DEFAULT_QUEUE) -> RunControl:
        """Move a run stranded on an application version no process runs any more to
        ``version``: its workflow is cancelled and a new run of the session is enqueued
        for the workers of ``version``, from the last committed step (what the stranded
        run did in its unfinished step is done again).

        Args:
            session_id: The session.
            version: The DBOS application version to move the run to.
            queue: The queue the new version's workers listen on.

        Returns:
            The new run.

        Raises:
            SessionNotFoundError: There is no such session.
            HelixError: No run waits to be recovered, or it is on ``version`` already.
        """
        return commands.move_to_version(self._pool, self._workflows, session_id, version, queue)

    def fork(self, session_id: str, from_step: int, new_session_id: str | None = None) -> SessionRecord:
        """A new, interrupted session holding ``session_id`` as it was after a step.

        Usage and events are not copied; the fork's first event, ``forked``, names the
        source. A worker that registered the agent continues it with
        ``executor.resume(agent, new_id)``.

        Args:
            session_id: The source session.
            from_step: Fork after this step.
            new_session_id: The new session's id (default: a new one).

        Returns:
            The new session's row.

        Raises:
            SessionNotFoundError: There is no session ``session_id``.
            HelixError: There is no step ``from_step``, or ``new_session_id`` exists.
        """
        return commands.fork(self._pool, session_id, from_step, new_session_id)

    def prune(
        self, completed_before: timedelta | datetime, *, dry_run: bool = False, batch_size: int = 100
    ) -> PruneReport:
        """Remove finished sessions, each with its whole sub-agent tree and their DBOS
        workflows::

            report = admin.prune(timedelta(days=30), dry_run=True)
            print(report.sessions, "sessions and", report.workflows, "workflows would go")

        Args:
            completed_before: Sessions finished this long ago (a duration) or before this
                time.
            dry_run: Only report what would go; remove nothing.
            batch_size: Session trees removed per transaction.

        Returns:
            What was (or would be) removed.

        Raises:
            HelixError: ``batch_size`` is below 1.
        """
        cutoff = Cutoff(age=completed_before) if isinstance(completed_before, timedelta) else Cutoff(at=completed_before)
        return commands.prune(self._pool, self._workflows, cutoff, dry_run=dry_run, batch_size=batch_size)

    # --- agent memory ---

    def _memories(self) -> MemoryStore:
        if self._memory is None:
            self._memory = MemoryStore(pool=self._pool)
        return self._memory

    def list_memories(self, prefix: Namespace = (), status: str | None = None, limit: int = 50) -> list[Memory]:
        """The newest memories under a namespace prefix.

        Args:
            prefix: A namespace prefix, e.g. ``("user",)``; ``()``: every namespace.
            status: Only memories whose embedding (in the active space) is ``pending``,
                ``complete`` or ``failed``.
            limit: At most this many.

        Returns:
            The memories, newest first.

        Raises:
            MemoryInputError: A bad prefix, status or limit.
        """
        return self._memories().list_memories(prefix, status=status, limit=limit)

    def search_memories(
        self, prefix: Namespace, query: str, limit: int = 10, mode: SearchMode = "hybrid"
    ) -> list[MemoryHit]:
        """The memories under ``prefix`` that best answer ``query``, as an agent's search
        finds them (text search where there are no vectors or no embedder here).

        Args:
            prefix: A namespace prefix.
            query: The words to look for.
            limit: At most this many hits.
            mode: ``"hybrid"``, ``"text"`` or ``"vector"``.

        Returns:
            Hits, best first.

        Raises:
            VectorSearchUnavailableError: ``mode="vector"`` where there are no vectors.
        """
        return self._memories().search(prefix, query, limit=limit, mode=mode)

    def get_memory(self, memory_id: int) -> Memory | None:
        """One memory with its provenance and embedding status.

        Args:
            memory_id: The memory's id.

        Returns:
            The memory, or None when there is none of that id.
        """
        return self._memories().get(memory_id)

    def forget_memory(self, namespace: Namespace, key: str | None = None, memory_id: int | None = None) -> bool:
        """Delete one memory, its vectors included.

        Args:
            namespace: The memory's namespace.
            key: The memory's key, or
            memory_id: its id.

        Returns:
            True when a memory went.

        Raises:
            MemoryInputError: Neither or both of ``key`` and ``memory_id``.
        """
        return self._memories().forget(namespace, key=key, memory_id=memory_id)

    def erase_memories(self, prefix: Namespace) -> dict[str, int]:
        """Delete every memory under a namespace prefix, vectors included (a person's
        request to be forgotten).

        Args:
            prefix: A namespace prefix of at least one part, e.g. ``("user", "u-42")``.

        Returns:
            How many memories, embedding states and vectors went.

        Raises:
            MemoryInputError: An empty prefix.
        """
        return self._memories().erase(prefix)

    def retry_failed_memories(self, prefix: Namespace = ()) -> int:
        """Make memories whose embedding failed pending again, for the embedding workers.

        Args:
            prefix: A namespace prefix; ``()``: every namespace.

        Returns:
            How many were made pending.
        """
        return self._memories().retry_failed(prefix)

    def _require(self, session_id: str) -> SessionRecord:
        with self._pool.connection() as conn:
            return commands.require_session(conn, session_id)

    def _control(self, session_id: str) -> RunControl:
        row = self._require(session_id)
        workflow_id = commands.latest_workflow_id(self._pool, row)
        return RunControl(session_id=session_id, run=row.run_count, workflow_id=workflow_id, status=row.status,
                          changed=True)


class AsyncAdminClient:
    """:class:`AdminClient` for async code: the same operations, awaited.

    Reads go over one pool of async connections, without a thread. What must reach a
    workflow (an answer, an abort, a resume, a move, a prune) goes through DBOS's
    synchronous client, the only one that sends inside the transaction that records it,
    so it runs in a worker thread on the client's one :class:`AdminClient`::

        async with AsyncAdminClient(url) as admin:
            detail = await admin.show_session("s1")
            await admin.approve("s1", "call_1", approver="ana")
            async for event in admin.stream("s1"):
                print(event.type)

    Args:
        url: The Postgres URL of the DBOS system database that holds helix's schema.

    Raises:
        DatabaseError: (at the first operation) ``url`` is invalid or does not answer, or
            its schema is missing or older than this package.
    """

    def __init__(self, url: str) -> None:
        self.url = validate_url(url)
        self._live: LiveStreams | None = None
        self._admin: AdminClient | None = None
        self._opening = asyncio.Lock()

    # --- lifetime ---

    async def close(self) -> None:
        """Close the pool, the listening connection and the DBOS client."""
        live, admin, self._live, self._admin = self._live, self._admin, None, None
        if live is not None:
            await live.close()
        if admin is not None:
            await asyncio.to_thread(admin.close)

    async def __aenter__(self) -> AsyncAdminClient:
        await self._reader()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def _reader(self) -> LiveStreams:
        """The async pool, once the URL was checked (in a thread, once per client)."""
        if self._live is None:
            async with self._opening:
                if self._live is None:
                    await asyncio.to_thread(_checked_url, self.url)
                    self._live = LiveStreams(self.url)
        return self._live

    async def _writer(self) -> AdminClient:
        """The synchronous client the thread-bound operations run on (made on first use)."""
        if self._admin is None:
            await self._reader()
            async with self._opening:
                if self._admin is None:
                    self._admin = await asyncio.to_thread(AdminClient, self.url)
        return self._admin

    async def _in_thread(self, name: str, *args: Any, **kwargs: Any) -> Any:
        admin = await self._writer()
        return await asyncio.to_thread(getattr(admin, name), *args, **kwargs)

    # --- reading ---

    async def list_sessions(self, limit: int = 50, status: str | None = None) -> list[SessionRecord]:
        """:meth:`AdminClient.list_sessions`, awaited.

        Args:
            limit: At most this many sessions.
            status: Only sessions with this status.

        Returns:
            The session rows, the most recently updated first.
        """
        require_storable("status", status)
        live = await self._reader()
        return await live.sessions(limit=limit, status=status)

    async def get_session(self, session_id: str, at_step: int | None = None) -> SessionRecord:
        """:meth:`AdminClient.get_session`, awaited.

        Args:
            session_id: The session.
            at_step: Give the state as it was after this step (default: the latest).

        Returns:
            The session row with ``messages``, ``state`` and ``pending`` loaded.

        Raises:
            SessionNotFoundError: There is no such session.
            HelixError: The session has no step ``at_step``.
        """
        live = await self._reader()
        return await live.with_connection(lambda conn: commands.get_session_async(conn, session_id, at_step))

    async def show_session(self, session_id: str) -> SessionDetail:
        """:meth:`AdminClient.show_session`, awaited::

            detail = await admin.show_session("s1")
            print(detail.session.status, detail.state, [call.tool_name for call in detail.pending])

        Args:
            session_id: The session.

        Returns:
            Everything an operator looks at for the session.

        Raises:
            SessionNotFoundError: There is no such session.
        """
        require_storable("session_id", session_id)
        live = await self._reader()
        return await live.with_connection(lambda conn: commands.session_detail_async(conn, session_id))

    async def list_runs(self, session_id: str) -> list[RunRecord]:
        """:meth:`AdminClient.list_runs`, awaited.

        Args:
            session_id: The session.

        Returns:
            The session's runs, oldest first.

        Raises:
            SessionNotFoundError: There is no such session.
        """
        async def read(conn: Any) -> list[RunRecord]:
            await commands.require_session_async(conn, session_id)
            return await reads.list_runs_async(conn, session_id)

        return await (await self._reader()).with_connection(read)

    async def get_current_run(self, session_id: str) -> RunRecord | None:
        """:meth:`AdminClient.get_current_run`, awaited.

        Args:
            session_id: The session.

        Returns:
            The latest run, or None for a session without runs.

        Raises:
            SessionNotFoundError: There is no such session.
        """
        runs = await self.list_runs(session_id)
        return runs[-1] if runs else None

    async def state_at(self, session_id: str, step: int | None = None) -> dict[str, Any]:
        """:meth:`AdminClient.state_at`, awaited.

        Args:
            session_id: The session.
            step: The step (default: the latest).

        Returns:
            The state after ``step``.

        Raises:
            SessionNotFoundError: There is no such session.
            HelixError: The session has no step ``step``.
        """
        async def read(conn: Any) -> dict[str, Any]:
            commands.require_step(await commands.require_session_async(conn, session_id), step)
            return await reads.load_state_async(conn, session_id, step)

        return await (await self._reader()).with_connection(read)

    async def get_usage(self, session_id: str) -> UsageSummary:
        """:meth:`AdminClient.get_usage`, awaited.

        Args:
            session_id: The session.

        Returns:
            The summed usage.

        Raises:
            SessionNotFoundError: There is no such session.
        """
        async def read(conn: Any) -> UsageSummary:
            await commands.require_session_async(conn, session_id)
            return await reads.usage_summary_async(conn, session_id)

        return await (await self._reader()).with_connection(read)

    async def list_pending(self, session_id: str | None = None) -> list[PendingToolCall]:
        """:meth:`AdminClient.list_pending`, awaited.

        Args:
            session_id: Only this session's calls, with its sub-sessions' (default: all).

        Returns:
            The pending calls.

        Raises:
            SessionNotFoundError: There is no session ``session_id``.
        """
        async def read(conn: Any) -> list[PendingToolCall]:
            if session_id is not None:
                await commands.require_session_async(conn, session_id)
            return await reads.list_pending_async(conn, session_id)

        return await (await self._reader()).with_connection(read)

    async def stream(
        self, session_id: str, from_seq: int = 0, follow: bool = True, deltas: bool = False
    ) -> AsyncIterator[EventRecord | DeltaRecord]:
        """:meth:`AdminClient.stream` for async code, on the client's one listening
        connection::

            async for item in admin.stream("s1", deltas=True):
                print(item.type)

        Args:
            session_id: The session.
            from_seq: The first event to yield.
            follow: Keep yielding until the session has no run in progress.
            deltas: Also yield the token deltas published while following.

        Yields:
            The events (and deltas), in order.

        Raises:
            SessionNotFoundError: There is no such session.
        """
        live = await self._reader()
        follow = follow and await self._running(live, session_id)
        async for item in follow_events_async(live, session_id, from_seq, deltas=deltas, follow=follow, until_run_end=False):
            yield item  # type: ignore[misc]
            if follow and isinstance(item, EventRecord) and item.type in RUN_END_EVENTS:
                if not await self._running(live, session_id):
                    return

    @staticmethod
    async def _running(live: LiveStreams, session_id: str) -> bool:
        row = await live.with_connection(lambda conn: commands.require_session_async(conn, session_id))
        return row.status in ACTIVE_STATUSES

    async def list_workers(self) -> list[WorkerStatus]:
        """:meth:`AdminClient.list_workers`, awaited (in a worker thread: DBOS's client).

        Returns:
            One :class:`WorkerStatus` per process.
        """
        found: list[WorkerStatus] = await self._in_thread("list_workers")
        return found

    # --- answering ---

    async def submit_tool_result(self, session_id: str, answer: ToolAnswer) -> SubmitOutcome:
        """:meth:`AdminClient.submit_tool_result`, awaited (in a worker thread).

        Args:
            session_id: The session whose call it is.
            answer: An :class:`ApprovalResponse` or a :class:`ClientToolResult`.

        Returns:
            The outcome.

        Raises:
            SessionNotFoundError: There is no such session.
            ToolCallNotPendingError: The call cannot take this answer.
            InvalidToolResultError: A client result does not match the tool's output schema.
        """
        outcome: SubmitOutcome = await self._in_thread("submit_tool_result", session_id, answer)
        return outcome

    async def approve(
        self, session_id: str, tool_call_id: str, reason: str | None = None, approver: str | None = None
    ) -> SubmitOutcome:
        """:meth:`AdminClient.approve`, awaited (in a worker thread).

        Args:
            session_id: The session whose call it is.
            tool_call_id: The call.
            reason: Why (kept in the audit row).
            approver: Who approves (kept in the audit row).

        Returns:
            The outcome.

        Raises:
            ToolCallNotPendingError: The call is not waiting for an approval.
        """
        response = ApprovalResponse(tool_call_id=tool_call_id, approved=True, reason=reason, approver=approver)
        return await self.submit_tool_result(session_id, response)

    async def deny(
        self, session_id: str, tool_call_id: str, reason: str, approver: str | None = None
    ) -> SubmitOutcome:
        """:meth:`AdminClient.deny`, awaited (in a worker thread).

        Args:
            session_id: The session whose call it is.
            tool_call_id: The call.
            reason: Why; the model reads it.
            approver: Who denies (kept in the audit row).

        Returns:
            The outcome.

        Raises:
            ToolCallNotPendingError: The call is not waiting for an approval.
        """
        response = ApprovalResponse(tool_call_id=tool_call_id, approved=False, reason=reason, approver=approver)
        return await self.submit_tool_result(session_id, response)

    async def submit(
        self, session_id: str, tool_call_id: str, result: Any = None, error: str | None = None
    ) -> SubmitOutcome:
        """:meth:`AdminClient.submit`, awaited (in a worker thread).

        Args:
            session_id: The session whose call it is.
            tool_call_id: The call.
            result: The tool's result.
            error: The tool's error message, instead of a result.

        Returns:
            The outcome.

        Raises:
            ToolCallNotPendingError: The call is not waiting for a client's result.
            InvalidToolResultError: ``result`` does not match the tool's output schema.
        """
        answer = ClientToolResult(tool_call_id=tool_call_id, result=result, error=error)
        return await self.submit_tool_result(session_id, answer)

    # --- controlling runs ---

    async def interrupt(self, session_id: str) -> RunControl:
        """:meth:`AdminClient.interrupt`, awaited: the same durable write, in one
        transaction over the pool, without a thread.

        Args:
            session_id: The session.

        Returns:
            What was asked.

        Raises:
            SessionNotFoundError: There is no such session.
            HelixError: The session has no run in progress.
        """
        live = await self._reader()
        if not await live.with_connection(lambda conn: commands.interrupt_async(conn, session_id)):
            row = await live.with_connection(lambda conn: commands.require_session_async(conn, session_id))
            raise commands.not_running(row)
        runs = await self.list_runs(session_id)
        row = await live.with_connection(lambda conn: commands.require_session_async(conn, session_id))
        workflow_id = runs[-1].workflow_id if runs else ""
        return RunControl(session_id=session_id, run=row.run_count, workflow_id=workflow_id, status=row.status,
                          changed=True)

    async def abort(self, session_id: str, reason: str = ABORTED_BY_OPERATOR) -> RunControl:
        """:meth:`AdminClient.abort`, awaited (in a worker thread).

        Args:
            session_id: The session.
            reason: Recorded as the run's error.

        Returns:
            What was done.

        Raises:
            SessionNotFoundError: There is no such session.
            HelixError: The session has no run in progress.
        """
        done: RunControl = await self._in_thread("abort", session_id, reason)
        return done

    async def resume(self, session_id: str, queue: str | None = None) -> RunControl:
        """:meth:`AdminClient.resume`, awaited (in a worker thread).

        Args:
            session_id: The session.
            queue: Enqueue a new run here when the session needs one.

        Returns:
            What was done.

        Raises:
            SessionNotFoundError: There is no such session.
            HelixError: Nothing can be resumed (the message says what to run instead).
        """
        done: RunControl = await self._in_thread("resume", session_id, queue)
        return done

    async def move(self, session_id: str, version: str, queue: str = DEFAULT_QUEUE) -> RunControl:
        """:meth:`AdminClient.move`, awaited (in a worker thread).

        Args:
            session_id: The session.
            version: The DBOS application version to move the run to.
            queue: The queue the new version's workers listen on.

        Returns:
            The new run.

        Raises:
            HelixError: No run waits to be recovered, or it is on ``version`` already.
        """
        done: RunControl = await self._in_thread("move", session_id, version, queue)
        return done

    async def fork(self, session_id: str, from_step: int, new_session_id: str | None = None) -> SessionRecord:
        """:meth:`AdminClient.fork`, awaited (in a worker thread).

        Args:
            session_id: The source session.
            from_step: Fork after this step.
            new_session_id: The new session's id (default: a new one).

        Returns:
            The new session's row.

        Raises:
            SessionNotFoundError: There is no session ``session_id``.
            HelixError: There is no step ``from_step``, or ``new_session_id`` exists.
        """
        created: SessionRecord = await self._in_thread("fork", session_id, from_step, new_session_id)
        return created

    async def prune(
        self, completed_before: timedelta | datetime, *, dry_run: bool = False, batch_size: int = 100
    ) -> PruneReport:
        """:meth:`AdminClient.prune`, awaited (in a worker thread).

        Args:
            completed_before: Sessions finished this long ago, or before this time.
            dry_run: Only report what would go.
            batch_size: Session trees removed per transaction.

        Returns:
            What was (or would be) removed.

        Raises:
            HelixError: ``batch_size`` is below 1.
        """
        report: PruneReport = await self._in_thread("prune", completed_before, dry_run=dry_run, batch_size=batch_size)
        return report

    # --- agent memory (in a worker thread) ---

    async def list_memories(self, prefix: Namespace = (), status: str | None = None, limit: int = 50) -> list[Memory]:
        """:meth:`AdminClient.list_memories`, awaited.

        Args:
            prefix: A namespace prefix; ``()``: every namespace.
            status: Only memories whose embedding is ``pending``, ``complete`` or ``failed``.
            limit: At most this many.

        Returns:
            The memories, newest first.
        """
        found: list[Memory] = await self._in_thread("list_memories", prefix, status, limit)
        return found

    async def search_memories(
        self, prefix: Namespace, query: str, limit: int = 10, mode: SearchMode = "hybrid"
    ) -> list[MemoryHit]:
        """:meth:`AdminClient.search_memories`, awaited.

        Args:
            prefix: A namespace prefix.
            query: The words to look for.
            limit: At most this many hits.
            mode: ``"hybrid"``, ``"text"`` or ``"vector"``.

        Returns:
            Hits, best first.
        """
        hits: list[MemoryHit] = await self._in_thread("search_memories", prefix, query, limit, mode)
        return hits

    async def get_memory(self, memory_id: int) -> Memory | None:
        """:meth:`AdminClient.get_memory`, awaited.

        Args:
            memory_id: The memory's id.

        Returns:
            The memory, or None.
        """
        found: Memory | None = await self._in_thread("get_memory", memory_id)
        return found

    async def forget_memory(self, namespace: Namespace, key: str | None = None, memory_id: int | None = None) -> bool:
        """:meth:`AdminClient.forget_memory`, awaited.

        Args:
            namespace: The memory's namespace.
            key: The memory's key, or
            memory_id: its id.

        Returns:
            True when a memory went.
        """
        gone: bool = await self._in_thread("forget_memory", namespace, key, memory_id)
        return gone

    async def erase_memories(self, prefix: Namespace) -> dict[str, int]:
        """:meth:`AdminClient.erase_memories`, awaited.

        Args:
            prefix: A namespace prefix of at least one part.

        Returns:
            How many memories, embedding states and vectors went.
        """
        counts: dict[str, int] = await self._in_thread("erase_memories", prefix)
        return counts

    async def retry_failed_memories(self, prefix: Namespace = ()) -> int:
        """:meth:`AdminClient.retry_failed_memories`, awaited.

        Args:
            prefix: A namespace prefix; ``()``: every namespace.

        Returns:
            How many were made pending.
        """
        count: int = await self._in_thread("retry_failed_memories", prefix)
        return count


# --- one-shot functions: each opens a client for the call ------------------------------------


def list_sessions(url: str, limit: int = 50, status: str | None = None) -> list[SessionRecord]:
    """:meth:`AdminClient.list_sessions` in one call.

    Args:
        url: The database URL.
        limit: At most this many sessions.
        status: Only sessions with this status.

    Returns:
        The session rows, the most recently updated first.
    """
    with AdminClient(url) as admin:
        return admin.list_sessions(limit, status)


async def list_sessions_async(url: str, limit: int = 50, status: str | None = None) -> list[SessionRecord]:
    """:meth:`AsyncAdminClient.list_sessions` in one call::

        sessions = await admin.list_sessions_async(url, status="awaiting_approval")

    Args:
        url: The database URL.
        limit: At most this many sessions.
        status: Only sessions with this status.

    Returns:
        The session rows, the most recently updated first.
    """
    async with AsyncAdminClient(url) as admin:
        return await admin.list_sessions(limit, status)


def get_session(url: str, session_id: str, at_step: int | None = None) -> SessionRecord:
    """:meth:`AdminClient.get_session` in one call.

    Args:
        url: The database URL.
        session_id: The session.
        at_step: Give the state as it was after this step (default: the latest).

    Returns:
        The session with its transcript, state and pending calls.

    Raises:
        SessionNotFoundError: There is no such session.
    """
    with AdminClient(url) as admin:
        return admin.get_session(session_id, at_step)


async def get_session_async(url: str, session_id: str, at_step: int | None = None) -> SessionRecord:
    """:meth:`AsyncAdminClient.get_session` in one call.

    Args:
        url: The database URL.
        session_id: The session.
        at_step: Give the state as it was after this step (default: the latest).

    Returns:
        The session with its transcript, state and pending calls.

    Raises:
        SessionNotFoundError: There is no such session.
    """
    async with AsyncAdminClient(url) as admin:
        return await admin.get_session(session_id, at_step)


def show_session(url: str, session_id: str) -> SessionDetail:
    """:meth:`AdminClient.show_session` in one call.

    Args:
        url: The database URL.
        session_id: The session.

    Returns:
        Everything an operator looks at for the session.

    Raises:
        SessionNotFoundError: There is no such session.
    """
    with AdminClient(url) as admin:
        return admin.show_session(session_id)


async def show_session_async(url: str, session_id: str) -> SessionDetail:
    """:meth:`AsyncAdminClient.show_session` in one call::

        detail = await admin.show_session_async(url, "s1")

    Args:
        url: The database URL.
        session_id: The session.

    Returns:
        Everything an operator looks at for the session.

    Raises:
        SessionNotFoundError: There is no such session.
    """
    async with AsyncAdminClient(url) as admin:
        return await admin.show_session(session_id)


def list_runs(url: str, session_id: str) -> list[RunRecord]:
    """:meth:`AdminClient.list_runs` in one call.

    Args:
        url: The database URL.
        session_id: The session.

    Returns:
        The session's runs, oldest first.

    Raises:
        SessionNotFoundError: There is no such session.
    """
    with AdminClient(url) as admin:
        return admin.list_runs(session_id)


async def list_runs_async(url: str, session_id: str) -> list[RunRecord]:
    """:meth:`AsyncAdminClient.list_runs` in one call.

    Args:
        url: The database URL.
        session_id: The session.

    Returns:
        The session's runs, oldest first.

    Raises:
        SessionNotFoundError: There is no such session.
    """
    async with AsyncAdminClient(url) as admin:
        return await admin.list_runs(session_id)


def get_current_run(url: str, session_id: str) -> RunRecord | None:
    """:meth:`AdminClient.get_current_run` in one call.

    Args:
        url: The database URL.
        session_id: The session.

    Returns:
        The latest run, or None for a session without runs.

    Raises:
        SessionNotFoundError: There is no such session.
    """
    with AdminClient(url) as admin:
        return admin.get_current_run(session_id)


async def get_current_run_async(url: str, session_id: str) -> RunRecord | None:
    """:meth:`AsyncAdminClient.get_current_run` in one call.

    Args:
        url: The database URL.
        session_id: The session.

    Returns:
        The latest run, or None for a session without runs.

    Raises:
        SessionNotFoundError: There is no such session.
    """
    async with AsyncAdminClient(url) as admin:
        return await admin.get_current_run(session_id)


def state_at(url: str, session_id: str, step: int | None = None) -> dict[str, Any]:
    """:meth:`AdminClient.state_at` in one call.

    Args:
        url: The database URL.
        session_id: The session.
        step: The step (default: the latest).

    Returns:
        The state after ``step``.

    Raises:
        SessionNotFoundError: There is no such session.
        HelixError: The session has no step ``step``.
    """
    with AdminClient(url) as admin:
        return admin.state_at(session_id, step)


async def state_at_async(url: str, session_id: str, step: int | None = None) -> dict[str, Any]:
    """:meth:`AsyncAdminClient.state_at` in one call.

    Args:
        url: The database URL.
        session_id: The session.
        step: The step (default: the latest).

    Returns:
        The state after ``step``.

    Raises:
        SessionNotFoundError: There is no such session.
        HelixError: The session has no step ``step``.
    """
    async with AsyncAdminClient(url) as admin:
        return await admin.state_at(session_id, step)


def get_usage(url: str, session_id: str) -> UsageSummary:
    """:meth:`AdminClient.get_usage` in one call.

    Args:
        url: The database URL.
        session_id: The session.

    Returns:
        The summed usage.

    Raises:
        SessionNotFoundError: There is no such session.
    """
    with AdminClient(url) as admin:
        return admin.get_usage(session_id)


async def get_usage_async(url: str, session_id: str) -> UsageSummary:
    """:meth:`AsyncAdminClient.get_usage` in one call.

    Args:
        url: The database URL.
        session_id: The session.

    Returns:
        The summed usage.

    Raises:
        SessionNotFoundError: There is no such session.
    """
    async with AsyncAdminClient(url) as admin:
        return await admin.get_usage(session_id)


def list_pending(url: str, session_id: str | None = None) -> list[PendingToolCall]:
    """:meth:`AdminClient.list_pending` in one call.

    Args:
        url: The database URL.
        session_id: Only this session's calls, with its sub-sessions' (default: all).

    Returns:
        The pending calls.

    Raises:
        SessionNotFoundError: There is no session ``session_id``.
    """
    with AdminClient(url) as admin:
        return admin.list_pending(session_id)


async def list_pending_async(url: str, session_id: str | None = None) -> list[PendingToolCall]:
    """:meth:`AsyncAdminClient.list_pending` in one call.

    Args:
        url: The database URL.
        session_id: Only this session's calls, with its sub-sessions' (default: all).

    Returns:
        The pending calls.

    Raises:
        SessionNotFoundError: There is no session ``session_id``.
    """
    async with AsyncAdminClient(url) as admin:
        return await admin.list_pending(session_id)


def stream(
    url: str, session_id: str, from_seq: int = 0, follow: bool = True, deltas: bool = False
) -> Iterator[EventRecord | DeltaRecord]:
    """:meth:`AdminClient.stream` in one call; the client closes when the iterator ends
    (or is closed).

    Args:
        url: The database URL.
        session_id: The session.
        from_seq: The first event to yield.
        follow: Keep yielding until the session has no run in progress.
        deltas: Also yield the token deltas published while following.

    Returns:
        An iterator over the events (and deltas).

    Raises:
        SessionNotFoundError: There is no such session (raised by this call).
    """
    admin = AdminClient(url)
    try:
        items = admin.stream(session_id, from_seq, follow, deltas)
    except BaseException:
        admin.close()
        raise
    return _closing(admin, items)


def _closing(admin: AdminClient, items: Iterator[T]) -> Iterator[T]:
    with admin:
        yield from items


async def stream_async(
    url: str, session_id: str, from_seq: int = 0, follow: bool = True, deltas: bool = False
) -> AsyncIterator[EventRecord | DeltaRecord]:
    """:meth:`AsyncAdminClient.stream` in one call.

    Args:
        url: The database URL.
        session_id: The session.
        from_seq: The first event to yield.
        follow: Keep yielding until the session has no run in progress.
        deltas: Also yield the token deltas published while following.

    Yields:
        The events (and deltas), in order.

    Raises:
        SessionNotFoundError: There is no such session.
    """
    async with AsyncAdminClient(url) as admin:
        async for item in admin.stream(session_id, from_seq, follow, deltas):
            yield item


def list_workers(url: str) -> list[WorkerStatus]:
    """:meth:`AdminClient.list_workers` in one call.

    Args:
        url: The database URL.

    Returns:
        One :class:`WorkerStatus` per process.
    """
    with AdminClient(url) as admin:
        return admin.list_workers()


async def list_workers_async(url: str) -> list[WorkerStatus]:
    """:meth:`AsyncAdminClient.list_workers` in one call.

    Args:
        url: The database URL.

    Returns:
        One :class:`WorkerStatus` per process.
    """
    return await asyncio.to_thread(list_workers, url)


def submit_tool_result(url: str, session_id: str, answer: ToolAnswer) -> SubmitOutcome:
    """:meth:`AdminClient.submit_tool_result` in one call.

    Args:
        url: The database URL.
        session_id: The session whose call it is.
        answer: An :class:`ApprovalResponse` or a :class:`ClientToolResult`.

    Returns:
        The outcome; ``status="already_answered"`` means an earlier answer stands.

    Raises:
        SessionNotFoundError: There is no such session.
        ToolCallNotPendingError: The call cannot take this answer.
        InvalidToolResultError: A client result does not match the tool's output schema.
    """
    with AdminClient(url) as admin:
        return admin.submit_tool_result(session_id, answer)


async def submit_tool_result_async(url: str, session_id: str, answer: ToolAnswer) -> SubmitOutcome:
    """:func:`submit_tool_result` for async code (in a worker thread).

    Args:
        url: The database URL.
        session_id: The session whose call it is.
        answer: An :class:`ApprovalResponse` or a :class:`ClientToolResult`.

    Returns:
        The outcome.

    Raises:
        ToolCallNotPendingError: The call cannot take this answer.
    """
    return await asyncio.to_thread(submit_tool_result, url, session_id, answer)


def approve(
    url: str, session_id: str, tool_call_id: str, reason: str | None = None, approver: str | None = None
) -> SubmitOutcome:
    """:meth:`AdminClient.approve` in one call: the tool runs with its original input.

    Args:
        url: The database URL.
        session_id: The session whose call it is.
        tool_call_id: The call.
        reason: Why (kept in the audit row).
        approver: Who approves (kept in the audit row).

    Returns:
        The outcome; ``status="already_answered"`` means an earlier answer stands.

    Raises:
        ToolCallNotPendingError: The call is not waiting for an approval.
    """
    with AdminClient(url) as admin:
        return admin.approve(session_id, tool_call_id, reason, approver)


async def approve_async(
    url: str, session_id: str, tool_call_id: str, reason: str | None = None, approver: str | None = None
) -> SubmitOutcome:
    """:func:`approve` for async code (in a worker thread).

    Args:
        url: The database URL.
        session_id: The session whose call it is.
        tool_call_id: The call.
        reason: Why (kept in the audit row).
        approver: Who approves (kept in the audit row).

    Returns:
        The outcome.

    Raises:
        ToolCallNotPendingError: The call is not waiting for an approval.
    """
    return await asyncio.to_thread(approve, url, session_id, tool_call_id, reason, approver)


def deny(url: str, session_id: str, tool_call_id: str, reason: str, approver: str | None = None) -> SubmitOutcome:
    """:meth:`AdminClient.deny` in one call: the tool never runs; the model reads the reason.

    Args:
        url: The database URL.
        session_id: The session whose call it is.
        tool_call_id: The call.
        reason: Why; the model reads it.
        approver: Who denies (kept in the audit row).

    Returns:
        The outcome.

    Raises:
        ToolCallNotPendingError: The call is not waiting for an approval.
    """
    with AdminClient(url) as admin:
        return admin.deny(session_id, tool_call_id, reason, approver)


async def deny_async(url: str, session_id: str, tool_call_id: str, reason: str, approver: str | None = None) -> SubmitOutcome:
    """:func:`deny` for async code (in a worker thread).

    Args:
        url: The database URL.
        session_id: The session whose call it is.
        tool_call_id: The call.
        reason: Why; the model reads it.
        approver: Who denies (kept in the audit row).

    Returns:
        The outcome.

    Raises:
        ToolCallNotPendingError: The call is not waiting for an approval.
    """
    return await asyncio.to_thread(deny, url, session_id, tool_call_id, reason, approver)


def submit(url: str, session_id: str, tool_call_id: str, result: Any = None, error: str | None = None) -> SubmitOutcome:
    """:meth:`AdminClient.submit` in one call: a client-executed call's result or error.

    Args:
        url: The database URL.
        session_id: The session whose call it is.
        tool_call_id: The call.
        result: The tool's result (checked against the tool's output schema).
        error: The tool's error message, instead of a result.

    Returns:
        The outcome.

    Raises:
        ToolCallNotPendingError: The call is not waiting for a client's result.
        InvalidToolResultError: ``result`` does not match the tool's output schema.
    """
    with AdminClient(url) as admin:
        return admin.submit(session_id, tool_call_id, result, error)


async def submit_async(
    url: str, session_id: str, tool_call_id: str, result: Any = None, error: str | None = None
) -> SubmitOutcome:
    """:func:`submit` for async code (in a worker thread).

    Args:
        url: The database URL.
        session_id: The session whose call it is.
        tool_call_id: The call.
        result: The tool's result.
        error: The tool's error message, instead of a result.

    Returns:
        The outcome.

    Raises:
        ToolCallNotPendingError: The call is not waiting for a client's result.
    """
    return await asyncio.to_thread(submit, url, session_id, tool_call_id, result, error)


def interrupt(url: str, session_id: str) -> RunControl:
    """:meth:`AdminClient.interrupt` in one call: stop after the current step, resumable.

    Args:
        url: The database URL.
        session_id: The session.

    Returns:
        What was asked.

    Raises:
        SessionNotFoundError: There is no such session.
        HelixError: The session has no run in progress.
    """
    with AdminClient(url) as admin:
        return admin.interrupt(session_id)


async def interrupt_async(url: str, session_id: str) -> RunControl:
    """:meth:`AsyncAdminClient.interrupt` in one call (no thread).

    Args:
        url: The database URL.
        session_id: The session.

    Returns:
        What was asked.

    Raises:
        SessionNotFoundError: There is no such session.
        HelixError: The session has no run in progress.
    """
    async with AsyncAdminClient(url) as admin:
        return await admin.interrupt(session_id)


def abort(url: str, session_id: str, reason: str = ABORTED_BY_OPERATOR) -> RunControl:
    """:meth:`AdminClient.abort` in one call: the run in progress ends ``aborted`` now.

    Args:
        url: The database URL.
        session_id: The session.
        reason: Recorded as the run's error.

    Returns:
        What was done.

    Raises:
        SessionNotFoundError: There is no such session.
        HelixError: The session has no run in progress.
    """
    with AdminClient(url) as admin:
        return admin.abort(session_id, reason)


async def abort_async(url: str, session_id: str, reason: str = ABORTED_BY_OPERATOR) -> RunControl:
    """:func:`abort` for async code (in a worker thread).

    Args:
        url: The database URL.
        session_id: The session.
        reason: Recorded as the run's error.

    Returns:
        What was done.

    Raises:
        HelixError: The session has no run in progress.
    """
    return await asyncio.to_thread(abort, url, session_id, reason)


def resume(url: str, session_id: str, queue: str | None = None) -> RunControl:
    """:meth:`AdminClient.resume` in one call.

    Args:
        url: The database URL.
        session_id: The session.
        queue: Enqueue a new run here when the session needs one.

    Returns:
        What was done.

    Raises:
        SessionNotFoundError: There is no such session.
        HelixError: Nothing can be resumed (the message says what to run instead).
    """
    with AdminClient(url) as admin:
        return admin.resume(session_id, queue)


async def resume_async(url: str, session_id: str, queue: str | None = None) -> RunControl:
    """:func:`resume` for async code (in a worker thread).

    Args:
        url: The database URL.
        session_id: The session.
        queue: Enqueue a new run here when the session needs one.

    Returns:
        What was done.

    Raises:
        HelixError: Nothing can be resumed (the message says what to run instead).
    """
    return await asyncio.to_thread(resume, url, session_id, queue)


def move(url: str, session_id: str, version: str, queue: str = DEFAULT_QUEUE) -> RunControl:
    """:meth:`AdminClient.move` in one call.

    Args:
        url: The database URL.
        session_id: The session.
        version: The DBOS application version to move the run to.
        queue: The queue the new version's workers listen on.

    Returns:
        The new run.

    Raises:
        HelixError: No run waits to be recovered, or it is on ``version`` already.
    """
    with AdminClient(url) as admin:
        return admin.move(session_id, version, queue)


async def move_async(url: str, session_id: str, version: str, queue: str = DEFAULT_QUEUE) -> RunControl:
    """:func:`move` for async code (in a worker thread).

    Args:
        url: The database URL.
        session_id: The session.
        version: The DBOS application version to move the run to.
        queue: The queue the new version's workers listen on.

    Returns:
        The new run.

    Raises:
        HelixError: No run waits to be recovered, or it is on ``version`` already.
    """
    return await asyncio.to_thread(move, url, session_id, version, queue)


def fork(url: str, session_id: str, from_step: int, new_session_id: str | None = None) -> SessionRecord:
    """:meth:`AdminClient.fork` in one call.

    Args:
        url: The database URL.
        session_id: The source session.
        from_step: Fork after this step.
        new_session_id: The new session's id (default: a new one).

    Returns:
        The new, interrupted session's row.

    Raises:
        SessionNotFoundError: There is no session ``session_id``.
        HelixError: There is no step ``from_step``, or ``new_session_id`` exists.
    """
    with AdminClient(url) as admin:
        return admin.fork(session_id, from_step, new_session_id)


async def fork_async(url: str, session_id: str, from_step: int, new_session_id: str | None = None) -> SessionRecord:
    """:func:`fork` for async code (in a worker thread).

    Args:
        url: The database URL.
        session_id: The source session.
        from_step: Fork after this step.
        new_session_id: The new session's id (default: a new one).

    Returns:
        The new session's row.

    Raises:
        HelixError: There is no step ``from_step``, or ``new_session_id`` exists.
    """
    return await asyncio.to_thread(fork, url, session_id, from_step, new_session_id)


def prune(
    url: str, completed_before: timedelta | datetime, *, dry_run: bool = False, batch_size: int = 100
) -> PruneReport:
    """:meth:`AdminClient.prune` in one call::

        report = admin.prune(url, timedelta(days=30), dry_run=True)

    Args:
        url: The database URL.
        completed_before: Sessions finished this long ago, or before this time.
        dry_run: Only report what would go.
        batch_size: Session trees removed per transaction.

    Returns:
        What was (or would be) removed.

    Raises:
        HelixError: ``batch_size`` is below 1.
    """
    with AdminClient(url) as admin:
        return admin.prune(completed_before, dry_run=dry_run, batch_size=batch_size)


async def prune_async(
    url: str, completed_before: timedelta | datetime, *, dry_run: bool = False, batch_size: int = 100
) -> PruneReport:
    """:func:`prune` for async code (in a worker thread).

    Args:
        url: The database URL.
        completed_before: Sessions finished this long ago, or before this time.
        dry_run: Only report what would go.
        batch_size: Session trees removed per transaction.

    Returns:
        What was (or would be) removed.

    Raises:
        HelixError: ``batch_size`` is below 1.
    """
    return await asyncio.to_thread(prune, url, completed_before, dry_run=dry_run, batch_size=batch_size)


# --- old names, kept for one release ----------------------------------------------------------


# --- agent memory, one-shot ---


def list_memories(url: str, prefix: Namespace = (), status: str | None = None, limit: int = 50) -> list[Memory]:
    """:meth:`AdminClient.list_memories` in one call.

    Args:
        url: The database URL.
        prefix: A namespace prefix; ``()``: every namespace.
        status: Only memories whose embedding is ``pending``, ``complete`` or ``failed``.
        limit: At most this many.

    Returns:
        The memories, newest first.
    """
    with AdminClient(url) as admin:
        return admin.list_memories(prefix, status, limit)


async def list_memories_async(url: str, prefix: Namespace = (), status: str | None = None, limit: int = 50) -> list[Memory]:
    """:func:`list_memories` for async code (in a worker thread).

    Args:
        url: The database URL.
        prefix: A namespace prefix; ``()``: every namespace.
        status: Only memories whose embedding is ``pending``, ``complete`` or ``failed``.
        limit: At most this many.

    Returns:
        The memories, newest first.
    """
    return await asyncio.to_thread(list_memories, url, prefix, status, limit)


def search_memories(url: str, prefix: Namespace, query: str, limit: int = 10, mode: SearchMode = "hybrid") -> list[MemoryHit]:
    """:meth:`AdminClient.search_memories` in one call.

    Args:
        url: The database URL.
        prefix: A namespace prefix.
        query: The words to look for.
        limit: At most this many hits.
        mode: ``"hybrid"``, ``"text"`` or ``"vector"``.

    Returns:
        Hits, best first.
    """
    with AdminClient(url) as admin:
        return admin.search_memories(prefix, query, limit, mode)


async def search_memories_async(
    url: str, prefix: Namespace, query: str, limit: int = 10, mode: SearchMode = "hybrid"
) -> list[MemoryHit]:
    """:func:`search_memories` for async code (in a worker thread).

    Args:
        url: The database URL.
        prefix: A namespace prefix.
        query: The words to look for.
        limit: At most this many hits.
        mode: ``"hybrid"``, ``"text"`` or ``"vector"``.

    Returns:
        Hits, best first.
    """
    return await asyncio.to_thread(search_memories, url, prefix, query, limit, mode)


def get_memory(url: str, memory_id: int) -> Memory | None:
    """:meth:`AdminClient.get_memory` in one call.

    Args:
        url: The database URL.
        memory_id: The memory's id.

    Returns:
        The memory, or None.
    """
    with AdminClient(url) as admin:
        return admin.get_memory(memory_id)


async def get_memory_async(url: str, memory_id: int) -> Memory | None:
    """:func:`get_memory` for async code (in a worker thread).

    Args:
        url: The database URL.
        memory_id: The memory's id.

    Returns:
        The memory, or None.
    """
    return await asyncio.to_thread(get_memory, url, memory_id)


def forget_memory(url: str, namespace: Namespace, key: str | None = None, memory_id: int | None = None) -> bool:
    """:meth:`AdminClient.forget_memory` in one call.

    Args:
        url: The database URL.
        namespace: The memory's namespace.
        key: The memory's key, or
        memory_id: its id.

    Returns:
        True when a memory went.
    """
    with AdminClient(url) as admin:
        return admin.forget_memory(namespace, key, memory_id)


async def forget_memory_async(url: str, namespace: Namespace, key: str | None = None, memory_id: int | None = None) -> bool:
    """:func:`forget_memory` for async code (in a worker thread).

    Args:
        url: The database URL.
        namespace: The memory's namespace.
        key: The memory's key, or
        memory_id: its id.

    Returns:
        True when a memory went.
    """
    return await asyncio.to_thread(forget_memory, url, namespace, key, memory_id)


def erase_memories(url: str, prefix: Namespace) -> dict[str, int]:
    """:meth:`AdminClient.erase_memories` in one call.

    Args:
        url: The database URL.
        prefix: A namespace prefix of at least one part.

    Returns:
        How many memories, embedding states and vectors went.
    """
    with AdminClient(url) as admin:
        return admin.erase_memories(prefix)


async def erase_memories_async(url: str, prefix: Namespace) -> dict[str, int]:
    """:func:`erase_memories` for async code (in a worker thread).

    Args:
        url: The database URL.
        prefix: A namespace prefix of at least one part.

    Returns:
        How many memories, embedding states and vectors went.
    """
    return await asyncio.to_thread(erase_memories, url, prefix)


def retry_failed_memories(url: str, prefix: Namespace = ()) -> int:
    """:meth:`AdminClient.retry_failed_memories` in one call.

    Args:
        url: The database URL.
        prefix: A namespace prefix; ``()``: every namespace.

    Returns:
        How many were made pending.
    """
    with AdminClient(url) as admin:
        return admin.retry_failed_memories(prefix)


async def retry_failed_memories_async(url: str, prefix: Namespace = ()) -> int:
    """:func:`retry_failed_memories` for async code (in a worker thread).

    Args:
        url: The database URL.
        prefix: A namespace prefix; ``()``: every namespace.

    Returns:
        How many were made pending.
    """
    return await asyncio.to_thread(retry_failed_memories, url, prefix)


def cancel(url: str, session_id: str, reason: str = ABORTED_BY_OPERATOR) -> RunControl:
    """Deprecated: :func:`abort` (the executor, the CLI and the server say ``abort``).

    Args:
        url: The database URL.
        session_id: The session.
        reason: Recorded as the run's error.

    Returns:
        What :func:`abort` returns.
    """
    _renamed("cancel", "abort")
    return abort(url, session_id, reason)


async def cancel_async(url: str, session_id: str, reason: str = ABORTED_BY_OPERATOR) -> RunControl:
    """Deprecated: :func:`abort_async`.

    Args:
        url: The database URL.
        session_id: The session.
        reason: Recorded as the run's error.

    Returns:
        What :func:`abort_async` returns.
    """
    _renamed("cancel_async", "abort_async")
    return await abort_async(url, session_id, reason)


def tail(
    url: str, session_id: str, from_seq: int = 0, follow: bool = True, deltas: bool = False
) -> Iterator[EventRecord | DeltaRecord]:
    """Deprecated: :func:`stream` (the executor's name for the same reading).

    Args:
        url: The database URL.
        session_id: The session.
        from_seq: The first event to yield.
        follow: Keep yielding until the session has no run in progress.
        deltas: Also yield the token deltas published while following.

    Returns:
        What :func:`stream` returns.
    """
    _renamed("tail", "stream")
    return stream(url, session_id, from_seq, follow, deltas)


def _renamed(old: str, new: str) -> None:
    warnings.warn(
        f"helix_dbos.admin.{old} is deprecated and will be removed in the next release; use admin.{new}",
        DeprecationWarning, stacklevel=3,
    )


# --- helpers ----------------------------------------------------------------------------------


def _checked_url(url: str) -> str:
    """``url``, once it is valid, answers and has the current schema.

    Args:
        url: The database URL.

    Returns:
        The URL, validated.

    Raises:
        DatabaseError: It is invalid, does not answer, or its schema is not current.
    """
    url = validate_url(url)
    check_connection(url)
    check_schema(url)
    return url


def _worker_statuses(leases: list[WorkerRecord], pending: list[Any]) -> list[WorkerStatus]:
    """Each lease with its count of PENDING workflows, then one row per executor id that
    holds PENDING workflows without a lease.

    Args:
        leases: The worker leases, the most recently seen first.
        pending: DBOS's PENDING workflows (``WorkflowStatus`` objects).

    Returns:
        The worker statuses.
    """
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
    gone = "died (its lease expired)" if status == "dead" else "stopped"
    runs = f"{pending} run{'s' if pending != 1 else ''}"
    if status == "adopted":
        handed = worker.adopted_runs or 0
        note = f"adopted by {worker.adopted_by} ({handed} run{'s' if handed != 1 else ''} handed back)"
    elif status == "draining":
        note = "stopping: finishes its runs, takes no new ones"
    elif status in ("dead", "released") and not pending:
        note = f"{gone} with no runs in progress"
    elif status in ("dead", "released") and (worker.application_name, worker.application_version) not in live_versions:
        waits = "waits" if pending == 1 else "wait"
        note = f"{gone}; its {runs} {waits} for a live worker of version {worker.application_version}"
    elif status in ("dead", "released"):
        note = f"{gone}; a live worker of its version adopts its {runs} now"
    else:
        note = ""
    return WorkerStatus(
        executor_id=worker.executor_id, status=status, application_version=worker.application_version,
        host=worker.host, pid=worker.pid, queues=worker.queues, started_at=worker.started_at,
        last_seen=worker.last_seen, pending_runs=pending, adopted_by=worker.adopted_by,
        adopted_runs=worker.adopted_runs, note=note,
    )
