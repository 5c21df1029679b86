"""``DBOSAgentExecutor``: run agents as durable DBOS workflows inside your DBOS app.

Create it after ``DBOS(config=...)`` and before ``DBOS.launch()``, so its datasource
exists and recovered runs find their agents::

    DBOS(config={"name": "my-app", "system_database_url": url, "application_version": "my-app-1"})
    executor = DBOSAgentExecutor(llm=LiteLLMAdapter(), database_url=url)
    executor.register(research_agent)
    DBOS.launch()

    handle = executor.execute(research_agent, "What is DBOS?")
    print(handle.result().output)

This is a façade: runs are planned and controlled by the operator commands
(``_client/commands.py``) that the admin API and the CLI use too, and run by the workflow
side (``_durable/``), which knows nothing of this class.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import Future
from typing import Any, Literal

from dbos import (
    DBOS,
    DBOSPortableJSONSerializer,
    PropagateOtelContext,
    SetEnqueueOptions,
    SetWorkflowID,
    SQLAlchemyDatasource,
)

import helix_dbos.memory.embedding  # noqa: F401  (declares the embedding workflow before DBOS.launch())
from helix_dbos.memory.embedders import Embedder
from helix_dbos.agents import AgentConfig
from helix_dbos.answers import SubmitOutcome, ToolAnswer
from helix_dbos._client import commands
from helix_dbos._client.commands import input_text
from helix_dbos._client.handle import AgentHandle
from helix_dbos._client.leases import LeaseSettings, keep_lease
from helix_dbos._client.live import LiveStreams
from helix_dbos._client.streams import follow_events, follow_events_async
from helix_dbos._client.workflows import LocalWorkflows
from helix_dbos._database import resolve_database_url
from helix_dbos._deltas import DeltaRecord
from helix_dbos._durable.payloads import RunRequest, run_workflow_id
from helix_dbos._durable.runtime import AgentRuntime, current_runtime, install_runtime
from helix_dbos._durable.workflow import agent_run_workflow
from helix_dbos.errors import HelixError, SessionNotFoundError, WorkflowContextError
from helix_dbos.llm import LLMAdapter
from helix_dbos._logs import AnyLogger, EventLog
from helix_dbos.observability import switch as observability
from helix_dbos._store import reads
from helix_dbos._store.migrations import check_schema, migrate
from helix_dbos._store.records import EventRecord, PendingToolCall, RunRecord, SessionRecord, UsageSummary
from helix_dbos._store.retry import recognize_lost_connections, retry_or_unavailable_async
from helix_dbos._text import require_storable


class DBOSAgentExecutor:
    """Runs registered agents as ``helix_agent_run`` workflows; one per process.

    ``database_url`` is the DBOS system database: helix's tables live beside DBOS's, so
    an answer and the message that delivers it reach the same database. With
    ``run_migrations=False`` the schema is only checked (run ``helix-dbos migrate``).
    ``logger`` gets helix's events (a ``logging.Logger`` or a structlog-style logger,
    see :class:`~helix_dbos.StructuredLogger`); without one they go to the silent ``helix_dbos`` logger.

    Constructing it takes this process's worker lease (:class:`~helix_dbos.LeaseSettings`;
    ``lease`` sets its timing, default from ``$HELIX_LEASE_TTL``): from then on a run this
    process leaves behind, killed or drained, is adopted by another live process of the
    application, and this process adopts theirs. It raises :class:`ExecutorIdInUseError`
    when another live process has the same DBOS executor id.

    Args:
        llm: The model adapter every run of this process uses, e.g.
            :class:`~helix_dbos.LiteLLMAdapter`.
        database_url: The DBOS system database; default ``$HELIX_DATABASE_URL``, else
            ``$DBOS_SYSTEM_DATABASE_URL``.
        run_migrations: Apply helix's schema migrations at start (True), or only check
            that the schema is current (False).
        default_queue: The DBOS queue :meth:`execute` enqueues on when it is given none;
            None starts runs in this process.
        logger: Where helix's events go: a ``logging.Logger`` or a structlog-style logger.
        lease: The worker lease's timing; default from ``$HELIX_LEASE_TTL``.
        embedder: Embeds the queries of the tools' memory searches
            (``ctx.memory.search``), a :class:`helix_dbos.memory.Embedder`; None searches
            by text.

    Raises:
        ExecutorIdInUseError: Another live process holds this DBOS executor id's lease.
        SchemaOutdatedError: With ``run_migrations=False``, the schema is older than this
            release.
        DatabaseError: The database cannot be reached or migrated.
    """

    def __init__(
        self,
        llm: LLMAdapter,
        database_url: str | None = None,
        *,
        run_migrations: bool = True,
        default_queue: str | None = None,
        logger: AnyLogger | None = None,
        lease: LeaseSettings | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        log = EventLog(logger)
        observability.refresh()  # spans and metrics only where the app installed a provider
        self.default_queue = default_queue
        """Queue name ``execute`` enqueues on when it is given none (None: start in-process)."""
        self.database_url = resolve_database_url(database_url)
        recognize_lost_connections()
        if run_migrations:
            migrate(self.database_url)
        else:
            check_schema(self.database_url)
        datasource = SQLAlchemyDatasource.create(
            self.database_url, engine_kwargs={"pool_pre_ping": True}, serializer=DBOSPortableJSONSerializer()
        )
        self.runtime = AgentRuntime(llm, datasource, log)
        self.runtime.embedder = embedder  # embeds ctx.memory's search queries (helix_dbos.memory)
        self.pool = self.runtime.pool
        """Connections to the helix database for this executor's reads and commands (the runtime's)."""
        self._workflows = LocalWorkflows(self.database_url)
        install_runtime(self.runtime)
        self.lease = keep_lease(self.database_url, log, lease)
        """This process's worker lease (None without a configured DBOS, or with Conductor)."""
        self._live: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LiveStreams] = weakref.WeakKeyDictionary()

    @property
    def llm(self) -> LLMAdapter:
        """The model adapter every run of this process uses (replaceable, e.g. in tests)."""
        return self.runtime.llm

    @llm.setter
    def llm(self, adapter: LLMAdapter) -> None:
        self.runtime.llm = adapter

    @property
    def logger(self) -> AnyLogger:
        """Where this process's runs and commands log their events (replaceable)."""
        return self.runtime.log.logger

    @logger.setter
    def logger(self, logger: AnyLogger | None) -> None:
        self.runtime.log = EventLog(logger)

    # --- agents -------------------------------------------------------------------------

    def register(self, *agents: AgentConfig) -> None:
        """Make agents runnable by name; register every agent before ``DBOS.launch()``.

        Args:
            *agents: The agents to register; their sub-agents and persistent agents are
                registered with them.

        Raises:
            HelixError: Another agent of the same name is registered already.
        """
        self.runtime.register(agents)

    def agent(self, name: str) -> AgentConfig:
        """The registered agent called ``name``.

        Args:
            name: The agent's name.

        Returns:
            The agent's configuration.

        Raises:
            AgentNotRegisteredError: No agent of that name is registered.
        """
        return self.runtime.agent(name)

    # --- starting runs -------------------------------------------------------------------

    def execute(
        self,
        agent: AgentConfig | str,
        input: Any,
        session_id: str | None = None,
        queue: str | None = None,
        priority: int | None = None,
        owner: str | None = None,
    ) -> AgentHandle:
        """Start a run: a new session, or a new turn of an existing one that is not running.

        ``input`` is the user message: a string, or anything JSON-serializable.
        With ``queue`` (or the executor's ``default_queue``) the run is enqueued on that
        DBOS queue and any worker listening on it runs it (see :class:`~helix_dbos.QueueSettings`);
        ``priority`` orders queued runs (lower runs first). ``owner`` is who a new
        session belongs to (the agent server shows a session only to its owner, unless
        its ``authorize`` says otherwise); a session that exists with another owner is
        not found (:class:`SessionNotFoundError`), and nothing is started.

        When it returns, the session and its run are committed: any connection reads
        them, even while the run waits on a queue.
        A connection lost while starting is retried, and a start whose answer was lost
        hands out the run it started; a database that stays unreachable raises
        :class:`~helix_dbos.errors.DatabaseUnavailableError`, never a driver error.

        Called in your own DBOS workflow, the run is a durable child of it: planning the
        run is a checkpointed step, the run's workflow a child workflow, and the session
        id, when you give none, is derived from your workflow's id and that step, so a
        recovered workflow finds the same run instead of starting another one.
        ``handle.result()`` there is checkpointed too. Called inside a DBOS step it raises
        :class:`WorkflowContextError`: DBOS cannot record a run started there.

        Args:
            agent: The agent, or the name of a registered agent.
            input: The user message: a string, or anything JSON-serializable.
            session_id: The session to continue or create; None makes a new session id.
            queue: The DBOS queue to enqueue the run on; default the executor's
                ``default_queue`` (None: start it in this process).
            priority: The run's priority on its queue; lower runs first.
            owner: Who a new session belongs to; a session that exists with another owner
                is not found.

        Returns:
            A handle on the new run: ``handle.result()`` waits for its
            :class:`~helix_dbos.AgentResult`.

        Raises:
            SessionNotFoundError: The session exists with another owner.
            SessionBusyError: The session has a run in progress.
            HelixError: The session belongs to another agent.
            AgentNotRegisteredError: ``agent`` names no registered agent.
            WorkflowContextError: Called inside a DBOS step.
            DatabaseUnavailableError: The database stayed unreachable through every retry.
        """
        config = self._registered(agent)
        if _in_workflow_code():
            plan = DBOS.run_step(
                {"name": "helix_plan_run"}, _plan_child_run, config.name, input_text(input), session_id, "execute", owner
            )
            return self._start(RunRequest.model_validate(plan), queue or self.default_queue, priority)
        request = commands.plan_run(self.runtime.statements, config.name, input, session_id, owner=owner)
        return self._start(request, queue or self.default_queue, priority)

    async def execute_async(
        self,
        agent: AgentConfig | str,
        input: Any,
        session_id: str | None = None,
        queue: str | None = None,
        priority: int | None = None,
        owner: str | None = None,
    ) -> AgentHandle:
        """:meth:`execute` for async code, outside workflows: the session is read over the
        process's async connections and the run started with DBOS's
        ``start_workflow_async``, so it runs on this event loop (its async tools too), or
        enqueued with ``queue``. Connection faults are handled as in :meth:`execute`, and
        the session and its run are committed when it returns.
        ``await handle.result_async()`` waits for it without a thread.

        Args:
            agent: The agent, or the name of a registered agent.
            input: The user message: a string, or anything JSON-serializable.
            session_id: The session to continue or create; None makes a new session id.
            queue: The DBOS queue to enqueue the run on; default the executor's
                ``default_queue`` (None: run it on this event loop).
            priority: The run's priority on its queue; lower runs first.
            owner: Who a new session belongs to; a session that exists with another owner
                is not found.

        Returns:
            A handle on the new run: ``await handle.result_async()`` waits for its
            :class:`~helix_dbos.AgentResult`.

        Raises:
            SessionNotFoundError: The session exists with another owner.
            SessionBusyError: The session has a run in progress.
            WorkflowContextError: Called in workflow code (use :meth:`execute` there).
            DatabaseUnavailableError: The database stayed unreachable through every retry.
"""
        config = self._registered(agent)
        if DBOS.workflow_id is not None:
            raise WorkflowContextError("in workflow code, start agent runs with execute() (DBOS records it there)")
        request = await self._plan_async(commands.RunPlanning(config.name, input, session_id, owner=owner))
        return await self._start_async(request, queue or self.default_queue, priority)

    def resume(self, agent: AgentConfig | str, session_id: str) -> AgentHandle:
        """Continue an interrupted (or failed, or aborted) session where it stopped
        (in your own workflow, as a durable child, like :meth:`execute`).

        An interrupted or failed session gets a new run from its last committed step. An
        aborted one continues its own run (DBOS resumes the cancelled workflow), so a tool
        that finished after the abort is not run again.
        Connection faults are handled as in :meth:`execute`.

        Args:
            agent: The session's agent, or its registered name.
            session_id: The session to continue.

        Returns:
            A handle on the run that continues the session.

        Raises:
            SessionNotFoundError: There is no such session.
            SessionBusyError: The session has a run in progress.
            HelixError: The session is completed (start a new turn with :meth:`execute`).
        """
        config = self._registered(agent)
        if _in_workflow_code():
            plan = DBOS.run_step({"name": "helix_plan_run"}, _plan_child_run, config.name, None, session_id, "resume")
            return self._start(RunRequest.model_validate(plan))
        if commands.resumes_in_place(self.pool, self._workflows, session_id):
            control = commands.resume_workflow(self.pool, self._workflows, session_id)
            return AgentHandle(session_id, control.run, run_workflow_id(session_id, control.run))
        return self._start(commands.plan_run(self.runtime.statements, config.name, session_id=session_id, kind="resume"))

    async def resume_async(self, agent: AgentConfig | str, session_id: str) -> AgentHandle:
        """:meth:`resume` for async code, outside workflows: a new run is planned and
        started as :meth:`execute_async` does (the same handling of connection faults); an
        aborted run's own workflow is resumed through DBOS.

        Args:
            agent: The session's agent, or its registered name.
            session_id: The session to continue.

        Returns:
            A handle on the run that continues the session.

        Raises:
            SessionNotFoundError: There is no such session.
            SessionBusyError: The session has a run in progress.
            HelixError: The session is completed (start a new turn with :meth:`execute`).
            WorkflowContextError: Called in workflow code (use :meth:`resume` there).
        """
        config = self._registered(agent)
        if DBOS.workflow_id is not None:
            raise WorkflowContextError("in workflow code, resume agent runs with resume() (DBOS records it there)")
        if await asyncio.to_thread(commands.resumes_in_place, self.pool, self._workflows, session_id):
            control = await asyncio.to_thread(commands.resume_workflow, self.pool, self._workflows, session_id)
            return AgentHandle(session_id, control.run, control.workflow_id, _live=self.live())
        request = await self._plan_async(commands.RunPlanning(config.name, session_id=session_id, kind="resume"))
        return await self._start_async(request, None, None)

    def handle(self, session_id: str, run: int | None = None) -> AgentHandle:
        """A handle on run ``run`` (default: the latest) of a session.

        Args:
            session_id: The session.
            run: The run's number, from 1; None for the latest.

        Returns:
            A handle on that run.

        Raises:
            SessionNotFoundError: There is no such session.
            HelixError: The session has no run of that number.
        """
        row = self._require_session(session_id)
        if run is None:
            run = row.run_count
        elif not 1 <= run <= row.run_count:
            raise HelixError(f"session {session_id!r} has runs 1 to {row.run_count}; there is no run {run}")
        loop = _running_loop()
        return AgentHandle(session_id, run, run_workflow_id(session_id, run), _live=self._live.get(loop) if loop else None)

    def _start(self, request: RunRequest, queue: str | None = None, priority: int | None = None) -> AgentHandle:
        workflow_id = run_workflow_id(request.session_id, request.run)
        # In workflow code the start is one recorded operation: it does not wait.
        started = commands.start_run(
            self._workflows, request, lambda: self._start_workflow(request, workflow_id, queue, priority),
            wait=DBOS.workflow_id is None,
        )
        if started is None:  # an earlier attempt started it
            started = DBOS.retrieve_workflow(workflow_id, existing_workflow=False)
        if DBOS.workflow_id is None:  # workflow code leaves the claim to the run's own first transaction
            commands.claim_started_run(self.runtime.statements, request, self._initial_state(request))
        # A run this process executes: result() waits on its task instead of polling the database.
        future = getattr(started, "future", None)
        return AgentHandle(
            request.session_id, request.run, workflow_id, _future=future if isinstance(future, Future) else None,
            _workflow=started if DBOS.workflow_id is not None else None,
        )

    def _start_workflow(self, request: RunRequest, workflow_id: str, queue: str | None, priority: int | None) -> Any:
        """Start (or, with ``queue``, enqueue) the run's workflow; DBOS's handle on it.
        DBOS keeps the caller's span with it (``PropagateOtelContext``), so DBOS's span of
        the workflow nests there wherever it runs or is recovered."""
        if queue is not None:
            return self._workflows.enqueue(request, workflow_id, queue, priority)
        # "reject": a caller that raced another one to this run number must not get
        # the other caller's run (its own input would be dropped without a word).
        with SetWorkflowID(workflow_id, workflow_id_reuse_policy="reject"), PropagateOtelContext():
            return DBOS.start_workflow(agent_run_workflow, request.model_dump(mode="json"))

    async def _plan_async(self, planning: commands.RunPlanning) -> RunRequest:
        live = self.live()
        row = await retry_or_unavailable_async(lambda: live.session_row(planning.session_id), planning.reading)
        return planning.request(row)

    async def _start_async(self, request: RunRequest, queue: str | None, priority: int | None) -> AgentHandle:
        workflow_id = run_workflow_id(request.session_id, request.run)

        async def start() -> Any:
            with SetWorkflowID(workflow_id, workflow_id_reuse_policy="reject"), PropagateOtelContext():
                if queue is None:
                    return await DBOS.start_workflow_async(agent_run_workflow, request.model_dump(mode="json"))
                with SetEnqueueOptions(deduplication_id=request.session_id, priority=priority):
                    return await DBOS.enqueue_workflow_async(queue, agent_run_workflow, request.model_dump(mode="json"))

        async def own() -> bool:
            return await self._workflows.run_request_async(workflow_id) == request

        started = await commands.start_run_async(request, start, own)
        if started is None:  # an earlier attempt started it
            started = await DBOS.retrieve_workflow_async(workflow_id, existing_workflow=False)
        await asyncio.to_thread(commands.claim_started_run, self.runtime.statements, request, self._initial_state(request))
        return AgentHandle(
            request.session_id, request.run, workflow_id, _live=self.live(),
            _async_workflow=started if queue is None else None,
        )

    # --- controlling runs from any process ---------------------------------------------------

    def interrupt(self, session_id: str) -> bool:
        """Ask a running session (and its running sub-agents) to stop after the current
        step (status ``interrupted``).

        Args:
            session_id: The session to interrupt.

        Returns:
            True when a running run was asked to stop; False when none was running.
        """
        return commands.interrupt(self.pool, session_id)

    async def interrupt_async(self, session_id: str) -> bool:
        """:meth:`interrupt` for async code: one transaction over the process's async
        connections (:meth:`live`), no thread.

        Args:
            session_id: The session to interrupt.

        Returns:
            True when a running run was asked to stop; False when none was running.
        """
        return await self.live().with_connection(lambda conn: commands.interrupt_async(conn, session_id))

    def abort(self, session_id: str, reason: str = "aborted") -> bool:
        """Cancel the session's running workflow, and its sub-agents', now; runs end ``aborted``.

        Args:
            session_id: The session whose run to abort.
            reason: Why, recorded in the run's ``aborted`` event.

        Returns:
            True when a running run was cancelled; False when none was running.
        """
        return commands.abort(self.pool, self._workflows, session_id, reason)

    async def abort_async(self, session_id: str, reason: str = "aborted") -> bool:
        """:meth:`abort` for async code (in a worker thread: each run is ended, then its
        workflow cancelled, as :meth:`abort` does)::

            if not await executor.abort_async("s1", reason="the user left"):
                print("nothing was running")

        Args:
            session_id: The session.
            reason: Recorded as the run's error.

        Returns:
            True when a run was ended; False when none was in progress.

        Raises:
            SessionNotFoundError: There is no such session.
        """
        return await asyncio.to_thread(self.abort, session_id, reason)

    def submit_tool_result(self, session_id: str, answer: ToolAnswer) -> SubmitOutcome:
        """Answer a pending call: an :class:`ApprovalResponse` or a :class:`ClientToolResult`.

        A repeated answer returns ``status="already_answered"`` and changes nothing. A
        connection lost while answering is retried, and an answer whose commit went
        through before its connection broke returns ``accepted``.

        Args:
            session_id: The session (or sub-agent session) the call belongs to.
            answer: An :class:`~helix_dbos.ApprovalResponse` for a call that needs approval,
                or a :class:`~helix_dbos.ClientToolResult` for a client tool.

        Returns:
            ``accepted``, or ``already_answered`` for a repeated answer.

        Raises:
            SessionNotFoundError: There is no such session.
            ToolCallNotPendingError: The call is unknown, timed out, was cancelled with its
                run, or waits for an answer of the other kind.
            InvalidToolResultError: A client tool's output does not match its schema.
            DatabaseUnavailableError: The database stayed unreachable through every retry.
        """
        return commands.answer(self.pool, self._workflows, session_id, answer, log=self.runtime.log)

    async def submit_tool_result_async(self, session_id: str, answer: ToolAnswer) -> SubmitOutcome:
        """:meth:`submit_tool_result` for async code (in a worker thread: the answer and its
        message to the workflow commit in one transaction, which only DBOS's synchronous
        client can do).

        Args:
            session_id: The session whose call it is.
            answer: An :class:`ApprovalResponse` or a :class:`ClientToolResult`.

        Returns:
            The outcome; ``status="already_answered"`` means an earlier answer stands.

        Raises:
            SessionNotFoundError: There is no such session.
            ToolCallNotPendingError: The call cannot take this answer.
            InvalidToolResultError: A client result does not match the tool's output schema.
        """
        return await asyncio.to_thread(self.submit_tool_result, session_id, answer)

    # --- reading ---------------------------------------------------------------------------

    def get_session(self, session_id: str, at_step: int | None = None) -> SessionRecord:
        """The session with its transcript, state (optionally as of ``at_step``) and pending calls.

        Args:
            session_id: The session to read.
            at_step: Read the state as of this committed step (0: the initial state);
                None for the latest.

        Returns:
            The session record, with ``messages``, ``state`` and ``pending`` filled in.

        Raises:
            SessionNotFoundError: There is no such session.
            HelixError: The session has no step ``at_step``.
        """
        with self.pool.connection() as conn:
            return commands.get_session(conn, session_id, at_step)

    async def get_session_async(self, session_id: str, at_step: int | None = None) -> SessionRecord:
        """:meth:`get_session` for async code, over the process's async connections (:meth:`live`).

        Args:
            session_id: The session.
            at_step: Give the state as it was after this step (default: the latest).

        Returns:
            The session with its transcript, state and pending calls.

        Raises:
            SessionNotFoundError: There is no such session.
            HelixError: The session has no step ``at_step``.
        """
        return await self.live().with_connection(lambda conn: commands.get_session_async(conn, session_id, at_step))

    def get_current_run(self, session_id: str) -> RunRecord | None:
        """The session's latest run (with its DBOS status), or None before its first.

        Args:
            session_id: The session.

        Returns:
            The latest run, or None when the session has no run yet.

        Raises:
            SessionNotFoundError: There is no such session.
        """
        runs = self.list_runs(session_id)
        return runs[-1] if runs else None

    async def get_current_run_async(self, session_id: str) -> RunRecord | None:
        """:meth:`get_current_run` for async code.

        Args:
            session_id: The session.

        Returns:
            The latest run, or None before the session's first.

        Raises:
            SessionNotFoundError: There is no such session.
        """
        runs = await self.list_runs_async(session_id)
        return runs[-1] if runs else None

    def list_runs(self, session_id: str) -> list[RunRecord]:
        """Every run of the session, oldest first, each with its DBOS workflow's status.

        Args:
            session_id: The session.

        Returns:
            The session's runs, oldest first.

        Raises:
            SessionNotFoundError: There is no such session.
        """
        self._require_session(session_id)
        with self.pool.connection() as conn:
            return reads.list_runs(conn, session_id)

    async def list_runs_async(self, session_id: str) -> list[RunRecord]:
        """:meth:`list_runs` for async code.

        Args:
            session_id: The session.

        Returns:
            Every run, oldest first, each with its DBOS workflow's status.

        Raises:
            SessionNotFoundError: There is no such session.
        """

        async def read(conn: Any) -> list[RunRecord]:
            await commands.require_session_async(conn, session_id)
            return await reads.list_runs_async(conn, session_id)

        return await self.live().with_connection(read)

    def list_pending(self, session_id: str | None = None) -> list[PendingToolCall]:
        """Calls waiting for an answer: all, or one session's (with its sub-agents').

        Args:
            session_id: One session (with its sub-agents' sessions); None for every session.

        Returns:
            The pending calls, oldest first.
        """
        require_storable("session_id", session_id)
        with self.pool.connection() as conn:
            return reads.list_pending(conn, session_id)

    async def list_pending_async(self, session_id: str | None = None) -> list[PendingToolCall]:
        """:meth:`list_pending` for async code.

        Args:
            session_id: Only this session's calls, with its sub-agents' (default: all).

        Returns:
            The calls waiting for an answer.
        """
        require_storable("session_id", session_id)
        return await self.live().with_connection(lambda conn: reads.list_pending_async(conn, session_id))

    def get_usage(self, session_id: str) -> UsageSummary:
        """The session's usage, summed by source and by tool or model name.

        Args:
            session_id: The session.

        Returns:
            Tokens and cost, in total and by source.

        Raises:
            SessionNotFoundError: There is no such session.
        """
        self._require_session(session_id)
        with self.pool.connection() as conn:
            return reads.usage_summary(conn, session_id)

    async def get_usage_async(self, session_id: str) -> UsageSummary:
        """:meth:`get_usage` for async code.

        Args:
            session_id: The session.

        Returns:
            The session's usage, summed by source and by tool or model name.

        Raises:
            SessionNotFoundError: There is no such session.
        """

        async def read(conn: Any) -> UsageSummary:
            await commands.require_session_async(conn, session_id)
            return await reads.usage_summary_async(conn, session_id)

        return await self.live().with_connection(read)

    def stream(
        self, session_id: str, from_seq: int = 0, deltas: bool = False, **options: Any
    ) -> Iterator[EventRecord | DeltaRecord]:
        """Yield the session's durable events live, and with ``deltas`` the token deltas
        published while following.

        A session whose first run was just started (its row is not written yet) counts
        as existing: the stream waits for its first events.

        Args:
            session_id: The session to read.
            from_seq: The first event's ``seq``; 0 reads from the start (after a reconnect,
                the last ``seq`` seen plus one).
            deltas: Also yield the token deltas published while following
                (:class:`~helix_dbos.DeltaRecord`, without ``seq``).
            **options: ``follow`` (default True: wait for new events; False: stop at the
                last one), ``until_run_end`` (default True: return after an event that ends a
                run: ``finish``, ``error``, ``interrupted``, ``aborted``) and ``idle_timeout``
                (seconds without a new event or delta after which it returns; default None).

        Returns:
            The events (:class:`~helix_dbos.EventRecord`) in ``seq`` order, with the deltas
            between them.

        Raises:
            SessionNotFoundError: There is no such session, and no run of it was started.
        """
        if self._session_row(session_id) is None and DBOS.get_workflow_status(run_workflow_id(session_id, 1)) is None:
            raise SessionNotFoundError(f"no session {session_id!r}")
        return follow_events(self.database_url, session_id, from_seq, pool=self.pool, deltas=deltas, **options)

    def live(self) -> LiveStreams:
        """The async readers of this process in the running event loop: one listening
        connection and a small connection pool, shared by every async stream and wait.

        Returns:
            The running event loop's readers, made on first use.
        """
        loop = asyncio.get_running_loop()
        live = self._live.get(loop)
        if live is None:
            live = self._live[loop] = LiveStreams(self.database_url)
        return live

    async def stream_async(
        self, session_id: str, from_seq: int = 0, deltas: bool = False, **options: Any
    ) -> AsyncIterator[EventRecord | DeltaRecord]:
        """:meth:`stream` for async code: no thread and no connection of its own (the
        process's one listening connection fans events out to every stream).

        Args:
            session_id: The session to read.
            from_seq: The first event's ``seq``; 0 reads from the start (after a reconnect,
                the last ``seq`` seen plus one).
            deltas: Also yield the token deltas published while following
                (:class:`~helix_dbos.DeltaRecord`, without ``seq``).
            **options: ``follow`` (default True: wait for new events; False: stop at the
                last one), ``until_run_end`` (default True: return after an event that ends a
                run: ``finish``, ``error``, ``interrupted``, ``aborted``) and ``idle_timeout``
                (seconds without a new event or delta after which it returns; default None).

        Yields:
            The events (:class:`~helix_dbos.EventRecord`) in ``seq`` order, with the deltas
            between them.

        Raises:
            SessionNotFoundError: There is no such session, and no run of it was started.
        """
        require_storable("session_id", session_id)
        live = self.live()
        if await live.session_row(session_id) is None and await DBOS.get_workflow_status_async(
            run_workflow_id(session_id, 1)
        ) is None:
            raise SessionNotFoundError(f"no session {session_id!r}")
        async for item in follow_events_async(live, session_id, from_seq, deltas=deltas, **options):
            yield item  # type: ignore[misc]

    async def close_async(self) -> None:
        """Close the running event loop's listening connection and pool (an app's shutdown)."""
        live = self._live.pop(asyncio.get_running_loop(), None)
        if live is not None:
            await live.close()

    def _session_row(self, session_id: str) -> SessionRecord | None:
        require_storable("session_id", session_id)
        with self.pool.connection() as conn:
            return reads.get_session_row(conn, session_id)

    def _require_session(self, session_id: str) -> SessionRecord:
        with self.pool.connection() as conn:
            return commands.require_session(conn, session_id)

    def _initial_state(self, request: RunRequest) -> dict[str, Any]:
        return self.agent(request.agent_name).initial_state()

    def _registered(self, agent: AgentConfig | str) -> AgentConfig:
        if isinstance(agent, str):
            return self.agent(agent)
        if not self.runtime.is_registered(agent):
            self.register(agent)
        return agent


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _in_workflow_code() -> bool:
    """True in DBOS workflow code; raises inside a step, where nothing can be recorded."""
    if DBOS.workflow_id is None:
        return False
    if DBOS.step_id is not None:
        raise WorkflowContextError(
            "an agent run cannot be started or awaited inside a DBOS step (DBOS cannot record it there):"
            " call executor.execute() from workflow code, or from outside DBOS"
        )
    return True


def _plan_child_run(
    agent_name: str, input: str | None, session_id: str | None, kind: Literal["execute", "resume"] = "execute",
    owner: str | None = None,
) -> dict[str, Any]:
    """The ``helix_plan_run`` step: plan a run started by a workflow. Without a session id,
    the new session's id is the parent workflow's id and this step's: the same on replay."""
    sid = session_id or f"{DBOS.workflow_id}-agent-{DBOS.step_id}"
    request = commands.plan_run(current_runtime().pool, agent_name, input, sid, kind, owner)
    return request.model_dump(mode="json")
