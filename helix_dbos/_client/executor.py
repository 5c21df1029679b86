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

from helix_dbos.agents import AgentConfig
from helix_dbos.answers import SubmitOutcome, ToolAnswer
from helix_dbos._client import commands
from helix_dbos._client.commands import input_text
from helix_dbos._client.handle import AgentHandle
from helix_dbos._client.leases import LeaseSettings, keep_lease
from helix_dbos._client.live import LiveStreams
from helix_dbos._client.streams import follow_events
from helix_dbos._client.workflows import LocalWorkflows
from helix_dbos._database import resolve_database_url
from helix_dbos._deltas import DeltaRecord
from helix_dbos._durable.payloads import RunRequest, run_workflow_id
from helix_dbos._durable.runtime import AgentRuntime, current_runtime, install_runtime
from helix_dbos._durable.workflow import agent_run_workflow
from helix_dbos.errors import HelixError, SessionNotFoundError, WorkflowContextError
from helix_dbos.llm import LLMAdapter
from helix_dbos._logs import AnyLogger, EventLog
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
    ) -> None:
        log = EventLog(logger)
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
        self.engine = self.runtime.engine
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
        """Make agents runnable by name; register every agent before ``DBOS.launch()``."""
        self.runtime.register(agents)

    def agent(self, name: str) -> AgentConfig:
        """The registered agent called ``name``."""
        return self.runtime.agent(name)

    # --- starting runs -------------------------------------------------------------------

    def execute(
        self,
        agent: AgentConfig | str,
        input: Any,
        session_id: str | None = None,
        queue: str | None = None,
        priority: int | None = None,
    ) -> AgentHandle:
        """Start a run: a new session, or a new turn of an existing one that is not running.

        ``input`` is the user message: a string, or anything JSON-serializable.
        With ``queue`` (or the executor's ``default_queue``) the run is enqueued on that
        DBOS queue and any worker listening on it runs it (see :class:`~helix_dbos.QueueSettings`);
        ``priority`` orders queued runs (lower runs first).

        A connection lost while starting is retried, and a start whose answer was lost
        hands out the run it started (``commands.start_run``); a database that stays
        unreachable raises :class:`~helix_dbos.errors.DatabaseUnavailableError`, never a
        driver error.

        Called in your own DBOS workflow, the run is a durable child of it: planning the
        run is a checkpointed step, the run's workflow a child workflow, and the session
        id, when you give none, is derived from your workflow's id and that step, so a
        recovered workflow finds the same run instead of starting another one.
        ``handle.result()`` there is checkpointed too. Called inside a DBOS step it raises
        :class:`WorkflowContextError`: DBOS cannot record a run started there.
        """
        config = self._registered(agent)
        if _in_workflow_code():
            plan = DBOS.run_step({"name": "helix_plan_run"}, _plan_child_run, config.name, input_text(input), session_id)
            return self._start(RunRequest.model_validate(plan), queue or self.default_queue, priority)
        request = commands.plan_run(self.engine, config.name, input, session_id)
        return self._start(request, queue or self.default_queue, priority)

    async def execute_async(
        self,
        agent: AgentConfig | str,
        input: Any,
        session_id: str | None = None,
        queue: str | None = None,
        priority: int | None = None,
    ) -> AgentHandle:
        """:meth:`execute` for async code, outside workflows: the session is read over the
        process's async connections and the run started with DBOS's
        ``start_workflow_async``, so it runs on this event loop (its async tools too), or
        enqueued with ``queue``. Connection faults are handled as in :meth:`execute`
        (``commands.start_run_async``). ``await handle.result_async()`` waits for it
        without a thread."""
        config = self._registered(agent)
        if DBOS.workflow_id is not None:
            raise WorkflowContextError("in workflow code, start agent runs with execute() (DBOS records it there)")
        request = await self._plan_async(commands.RunPlanning(config.name, input, session_id))
        return await self._start_async(request, queue or self.default_queue, priority)

    def resume(self, agent: AgentConfig | str, session_id: str) -> AgentHandle:
        """Continue an interrupted (or failed, or aborted) session where it stopped
        (in your own workflow, as a durable child, like :meth:`execute`).

        An interrupted or failed session gets a new run from its last committed step. An
        aborted one continues its own run (DBOS resumes the cancelled workflow), so a tool
        that finished after the abort is not run again (``commands.resumes_in_place``).
        Connection faults are handled as in :meth:`execute`.
        """
        config = self._registered(agent)
        if _in_workflow_code():
            plan = DBOS.run_step({"name": "helix_plan_run"}, _plan_child_run, config.name, None, session_id, "resume")
            return self._start(RunRequest.model_validate(plan))
        if commands.resumes_in_place(self.engine, self._workflows, session_id):
            control = commands.resume_workflow(self.engine, self._workflows, session_id)
            return AgentHandle(session_id, control.run, run_workflow_id(session_id, control.run))
        return self._start(commands.plan_run(self.engine, config.name, session_id=session_id, kind="resume"))

    async def resume_async(self, agent: AgentConfig | str, session_id: str) -> AgentHandle:
        """:meth:`resume` for async code, outside workflows: a new run is planned and
        started as :meth:`execute_async` does (the same handling of connection faults); an
        aborted run's own workflow is resumed through DBOS."""
        config = self._registered(agent)
        if DBOS.workflow_id is not None:
            raise WorkflowContextError("in workflow code, resume agent runs with resume() (DBOS records it there)")
        if await asyncio.to_thread(commands.resumes_in_place, self.engine, self._workflows, session_id):
            control = await asyncio.to_thread(commands.resume_workflow, self.engine, self._workflows, session_id)
            return AgentHandle(session_id, control.run, control.workflow_id, _live=self.live())
        request = await self._plan_async(commands.RunPlanning(config.name, session_id=session_id, kind="resume"))
        return await self._start_async(request, None, None)

    def handle(self, session_id: str, run: int | None = None) -> AgentHandle:
        """A handle on run ``run`` (default: the latest) of a session."""
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
        return AgentHandle(
            request.session_id, request.run, workflow_id, _live=self.live(),
            _async_workflow=started if queue is None else None,
        )

    # --- controlling runs from any process ---------------------------------------------------

    def interrupt(self, session_id: str) -> bool:
        """Ask a running session (and its running sub-agents) to stop after the current
        step (status ``interrupted``)."""
        return commands.interrupt(self.engine, session_id)

    async def interrupt_async(self, session_id: str) -> bool:
        """:meth:`interrupt` for async code: one transaction over the process's async
        connections (:meth:`live`), no thread."""
        return await self.live().with_connection(lambda conn: commands.interrupt_async(conn, session_id))

    def abort(self, session_id: str, reason: str = "aborted") -> bool:
        """Cancel the session's running workflow, and its sub-agents', now; runs end ``aborted``."""
        return commands.abort(self.engine, self._workflows, session_id, reason)

    def submit_tool_result(self, session_id: str, answer: ToolAnswer) -> SubmitOutcome:
        """Answer a pending call: an :class:`ApprovalResponse` or a :class:`ClientToolResult`.

        Raises :class:`SessionNotFoundError`, :class:`ToolCallNotPendingError` (unknown call,
        a call that timed out or was cancelled with its run, or an answer of the wrong
        kind) or :class:`InvalidToolResultError`; a repeated answer returns
        ``status="already_answered"`` and changes nothing. A connection lost while
        answering is retried, and an answer whose commit went through before its
        connection broke returns ``accepted``; a database that stays unreachable raises
        :class:`~helix_dbos.errors.DatabaseUnavailableError`.
        """
        return commands.answer(self.engine, self._workflows, session_id, answer, log=self.runtime.log)

    # --- reading ---------------------------------------------------------------------------

    def get_session(self, session_id: str, at_step: int | None = None) -> SessionRecord:
        """The session with its transcript, state (optionally as of ``at_step``) and pending calls."""
        require_storable("session_id", session_id)
        with self.engine.connect() as conn:
            row = reads.get_session_row(conn, session_id)
            if row is None:
                raise SessionNotFoundError(f"no session {session_id!r}")
            if at_step is not None and not 0 <= at_step <= row.step_count:
                raise HelixError(f"session {session_id!r} has steps 0 to {row.step_count}; there is no step {at_step}")
            row.messages = reads.load_messages(conn, session_id)
            row.state = reads.load_state(conn, session_id, at_step)
            row.pending = reads.list_pending(conn, session_id, include_descendants=False)
        return row

    def get_current_run(self, session_id: str) -> RunRecord | None:
        """The session's latest run (with its DBOS status), or None before its first."""
        runs = self.list_runs(session_id)
        return runs[-1] if runs else None

    def list_runs(self, session_id: str) -> list[RunRecord]:
        """Every run of the session, oldest first, each with its DBOS workflow's status."""
        self._require_session(session_id)
        with self.engine.connect() as conn:
            return reads.list_runs(conn, session_id)

    def list_pending(self, session_id: str | None = None) -> list[PendingToolCall]:
        """Calls waiting for an answer: all, or one session's (with its sub-agents')."""
        require_storable("session_id", session_id)
        with self.engine.connect() as conn:
            return reads.list_pending(conn, session_id)

    def get_usage(self, session_id: str) -> UsageSummary:
        """The session's usage, summed by source and by tool or model name."""
        self._require_session(session_id)
        with self.engine.connect() as conn:
            return reads.usage_summary(conn, session_id)

    def stream(
        self, session_id: str, from_seq: int = 0, deltas: bool = False, **options: Any
    ) -> Iterator[EventRecord | DeltaRecord]:
        """Yield the session's durable events live, and with ``deltas`` the token deltas
        published while following (see :func:`follow_events` for options).

        A session whose first run was just started (its row is not written yet) counts
        as existing: the stream waits for its first events.
        """
        if self._session_row(session_id) is None and DBOS.get_workflow_status(run_workflow_id(session_id, 1)) is None:
            raise SessionNotFoundError(f"no session {session_id!r}")
        return follow_events(self.database_url, session_id, from_seq, engine=self.engine, deltas=deltas, **options)

    def live(self) -> LiveStreams:
        """The async readers of this process in the running event loop: one listening
        connection and a small connection pool, shared by every async stream and wait."""
        loop = asyncio.get_running_loop()
        live = self._live.get(loop)
        if live is None:
            live = self._live[loop] = LiveStreams(self.database_url)
        return live

    async def stream_async(
        self, session_id: str, from_seq: int = 0, deltas: bool = False, **options: Any
    ) -> AsyncIterator[EventRecord | DeltaRecord]:
        """:meth:`stream` for async code: no thread and no connection of its own (the
        process's one listening connection fans events out to every stream). Options are ``follow``,
        ``until_run_end`` and ``idle_timeout``, as for :meth:`stream`."""
        require_storable("session_id", session_id)
        live = self.live()
        if await live.session_row(session_id) is None and await DBOS.get_workflow_status_async(
            run_workflow_id(session_id, 1)
        ) is None:
            raise SessionNotFoundError(f"no session {session_id!r}")
        async for item in live.follow(session_id, from_seq, deltas=deltas, **options):
            yield item  # type: ignore[misc]

    async def close_async(self) -> None:
        """Close the running event loop's listening connection and pool (an app's shutdown)."""
        live = self._live.pop(asyncio.get_running_loop(), None)
        if live is not None:
            await live.close()

    def _session_row(self, session_id: str) -> SessionRecord | None:
        require_storable("session_id", session_id)
        with self.engine.connect() as conn:
            return reads.get_session_row(conn, session_id)

    def _require_session(self, session_id: str) -> SessionRecord:
        with self.engine.connect() as conn:
            return commands.require_session(conn, session_id)

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
    agent_name: str, input: str | None, session_id: str | None, kind: Literal["execute", "resume"] = "execute"
) -> dict[str, Any]:
    """The ``helix_plan_run`` step: plan a run started by a workflow. Without a session id,
    the new session's id is the parent workflow's id and this step's: the same on replay."""
    sid = session_id or f"{DBOS.workflow_id}-agent-{DBOS.step_id}"
    request = commands.plan_run(current_runtime().engine, agent_name, input, sid, kind)
    return request.model_dump(mode="json")
