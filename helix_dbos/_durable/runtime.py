"""What workflow code runs with: the process's :class:`AgentRuntime` (the registered
agents, the LLM adapter, the datasource and its checkpointed transactions) and, per run,
its :class:`~helix_dbos._durable.run_scope.RunScope`.

The façade (``DBOSAgentExecutor``) builds one :class:`AgentRuntime` per process before
``DBOS.launch()`` and installs it; the ``helix_agent_run`` workflow finds it with
:func:`current_runtime`. Workflow code never sees the façade::

    runtime = AgentRuntime(llm, SQLAlchemyDatasource.create(url), log=EventLog(my_logger))
    runtime.register(research_agent)
    install_runtime(runtime)

The datasource transactions here commit together with their DBOS checkpoint; the step
commit is a plain transaction that needs none (it recognizes a step it already wrote).

A run's :class:`RunScope` is in ``run_scope.py``; the filter that keeps DBOS's log quiet
about aborted helix runs, which the runtime installs, is in ``dbos_log.py``.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from dbos import DBOS, SQLAlchemyDatasource
from psycopg import Connection

from helix_dbos.agents import AgentConfig
from helix_dbos._durable.children.companion_steps import CompanionSteps
from helix_dbos._durable.dbos_log import quiet_cancelled_runs
from helix_dbos._durable.payloads import RunRequest, RunStart, run_workflow_id
from helix_dbos._durable.run_claim import claim_run
from helix_dbos._durable.tool_execution.held_outcomes import HeldOutcomes
from helix_dbos._durable.tool_execution.watch import RunWatch
from helix_dbos.errors import AgentNotRegisteredError, HelixError
from helix_dbos.events import ApprovalRequestEvent, ClientToolRequestEvent, ErrorEvent, Event
from helix_dbos.llm import LLMAdapter
from helix_dbos._logs import EventLog
from helix_dbos._store import memories, reads, writes
from helix_dbos._store.memory_records import MemoryWrite
from helix_dbos._store.delta_channels import DeltaPublisher
from helix_dbos._store.pools import Pool, create_pool, create_statement_pool, datasource_transaction
from helix_dbos._store.live_events import LiveEventWriter
from helix_dbos._store.records import CommitOutcome, HookStateSave, RecordedOutcome, StepCommit, WaitState
from helix_dbos._store.retry import retry_transient
from helix_dbos.subagents import sub_agents_of
from helix_dbos.types import ACTIVE_STATUSES, Message, SessionStatus

RunContext = tuple[list[Message], dict[str, Any]]
"""A run's transcript and state as of its start."""


class AgentRuntime:
    """Agents by name, the LLM adapter, the log, and the checkpointed transactions of a run."""

    def __init__(self, llm: LLMAdapter, datasource: SQLAlchemyDatasource, log: EventLog | None = None) -> None:
        self.llm = llm
        self.log = log or EventLog()
        """Where workflow code writes its events (``helix_dbos._logs``)."""
        quiet_cancelled_runs(lambda: self.log)
        self.datasource = datasource
        self._agents: dict[str, AgentConfig] = {}
        self._run_agents: dict[tuple[str, int], AgentConfig] = {}
        url = datasource.engine.url.render_as_string(hide_password=False)
        self.pool: Pool = create_pool(url, name="helix-runtime")
        """Reads of workflow code, and the step commits that write memories too."""
        self.deltas = DeltaPublisher(url)
        """Publishes the LLM steps' token deltas (``_durable/streaming.py``)."""
        self.statements = create_statement_pool(url)
        """Single statements that commit on their own: the step commit, tool outcomes."""
        self.live_events = LiveEventWriter(url)
        """Writes the steps' keyed events as they happen (``_durable/streaming.py``)."""
        self.outcomes = HeldOutcomes(self.record_tool_outcome)
        """Tool outcomes until DBOS saves their steps' checkpoints (``_durable/tool_execution/held_outcomes.py``)."""
        self.run_watch = RunWatch(self.pool)
        """Tells this process's running tools when their run is interrupted or aborted."""
        self._began: dict[str, RunContext] = {}
        self._began_lock = threading.Lock()
        transaction = functools.partial(datasource_transaction, datasource)
        self.begin_run = transaction("helix_begin_run")(self._begin_run)
        """``begin_run(request, initial_state) -> RunStart`` (as JSON): claim the session, add the input."""
        self.continue_run = transaction("helix_continue_run")(self._continue_run)
        """``continue_run(request) -> RunStart`` (as JSON): check that the parked run still
        holds its session at its parked step (``refused`` otherwise: it was aborted); the
        continuation then holds the run (``helix.runs.workflow_id``)."""
        self.claim_child = transaction("helix_claim_child")(self._claim_child)
        """``claim_child(request) -> refusal``: create a sub-agent's session for its parent's
        call before its workflow starts (None), or say why that session is not the call's."""
        self.save_hook_state = transaction("helix_save_hook_state")(self._save_hook_state)
        """``save_hook_state(save) -> patch | None``: what the hooks of a committed step
        wrote, once (None: the session moved on, nothing written)."""
        self.fail_run = transaction("helix_fail_run")(self._fail_run)
        """``fail_run(request, error) -> ended``: end a run that raised."""
        self.suspend = transaction("helix_suspend")(self._suspend)
        """``suspend(session_id, run, step, status, rows)``: record a step's gated calls
        and their deadlines."""
        self.collect_answers = transaction("helix_collect_answers")(self._collect_answers)
        """``collect_answers(session_id, run, tool_call_ids) -> WaitState`` (as JSON): the
        calls answered in time or timed out, how long until the next deadline, and whether
        the run still holds the session (the waiter then holds the run: ``helix.runs.workflow_id``)."""
        self.embedder: Any = None
        """Embeds memory search queries (``helix_dbos.memory.Embedder``; None: text search only)."""
        self.companions = CompanionSteps(datasource, self.agent)
        """The companion tools' transactions (``_durable/children/companion_steps.py``)."""

    # --- agents ---------------------------------------------------------------------------

    def register(self, agents: Iterable[AgentConfig]) -> None:
        """Make agents (and the sub-agents their tools reach) runnable by name."""
        for agent in agents:
            for each in (agent, *sub_agents_of(agent)):
                known = self._agents.get(each.name)
                if known is not None and known is not each:
                    raise HelixError(f"another agent named {each.name!r} is already registered")
                self._agents[each.name] = each

    def is_registered(self, agent: AgentConfig) -> bool:
        return self._agents.get(agent.name) is agent

    def agent(self, name: str) -> AgentConfig:
        try:
            return self._agents[name]
        except KeyError:
            raise AgentNotRegisteredError(
                f"agent {name!r} is not registered in this process; call executor.register() before DBOS.launch()"
            ) from None

    @contextmanager
    def running(self, request: RunRequest, agent: AgentConfig) -> Iterator[None]:
        """Within this block, the steps of ``request``'s run see ``agent`` (the registered
        agent with the tools its toolsets listed for the run) by :meth:`run_agent`."""
        key = (request.session_id, request.run)
        self._run_agents[key] = agent
        try:
            yield
        finally:
            if self._run_agents.get(key) is agent:
                del self._run_agents[key]

    def run_agent(self, name: str, session_id: str, run: int) -> AgentConfig:
        """The agent run ``run`` of the session runs with: the registered agent named
        ``name``, with its toolsets' tools while the run runs here (:meth:`running`)."""
        return self._run_agents.get((session_id, run)) or self.agent(name)

    # --- transaction bodies (each runs inside a DBOS datasource transaction) ------------------

    def began_here(self, workflow_id: str) -> RunContext | None:
        """The transcript and state ``begin_run`` (or ``continue_run``) of this workflow
        read in its own transaction, when it ran in this process just now rather than
        returning its checkpoint: then this is the workflow's first execution, and none of
        its later steps ran before. None otherwise (the run reads them with
        :meth:`load_run_context`). Asked once, right after ``begin_run``."""
        with self._began_lock:
            return self._began.pop(workflow_id, None)

    def _begin_run(self, conn: Connection[Any], request: RunRequest, initial_state: dict[str, Any]) -> dict[str, Any]:
        claim = claim_run(conn, request, initial_state, context=True)
        if claim.refused is not None:
            return RunStart(refused=claim.refused).model_dump(mode="json")
        assert claim.context is not None
        self._mark_began(request, claim.context)
        start = RunStart(
            step_count=claim.step_count, message_seq=claim.message_seq, start_seq=claim.start_seq, queue=claim.queue,
        )
        return start.model_dump(mode="json")

    def _continue_run(self, conn: Connection[Any], request: RunRequest) -> dict[str, Any]:
        parked = request.parked
        assert parked is not None
        row = writes.lock_session(conn, request.session_id)
        where = (request.run, parked.step - 1)
        if row is None or row["status"] not in ACTIVE_STATUSES or (row["run_count"], row["step_count"]) != where:
            now = "gone" if row is None else f"{row['status']} at run {row['run_count']}, step {row['step_count']}"
            refused = (
                f"run {request.run} of session {request.session_id!r} no longer waits at step {parked.step}"
                f" (the session is {now}); its continuation changed nothing"
            )
            return RunStart(refused=refused).model_dump(mode="json")
        writes.follow_run_workflow(conn, request.workflow_id)
        start = RunStart(step_count=row["step_count"], message_seq=row["message_count"], queue=parked.queue)
        self._mark_began(request, _read_run_context(conn, request.session_id, start.message_seq, start.step_count))
        return start.model_dump(mode="json")

    def _mark_began(self, request: RunRequest, context: RunContext) -> None:
        """Remember the run's context, read in the transaction that began it, for
        :meth:`began_here`."""
        with self._began_lock:
            self._began[request.workflow_id] = context

    def _claim_child(self, conn: Connection[Any], request: RunRequest) -> str | None:
        assert request.parent_session_id is not None and request.parent_tool_call_id is not None
        return writes.claim_child_session(
            conn, session_id=request.session_id, agent_name=request.agent_name,
            initial_state=self.agent(request.agent_name).initial_state(),
            root_session_id=request.root_session_id or request.parent_session_id,
            parent_session_id=request.parent_session_id, parent_tool_call_id=request.parent_tool_call_id,
            first_workflow_id=run_workflow_id(request.session_id, 1),
        )

    def _save_hook_state(self, conn: Connection[Any], save: HookStateSave) -> list[dict[str, Any]] | None:
        return writes.save_hook_state(conn, save)

    def _fail_run(self, conn: Connection[Any], request: RunRequest, error: str) -> bool:
        return writes.end_run(
            conn, session_id=request.session_id, run=request.run, status="failed", error=error,
            stop_reason="error", event=ErrorEvent(error=error, stop_reason="error"),
        )

    def _suspend(
        self, conn: Connection[Any], session_id: str, run: int, step: int, status: SessionStatus, rows: list[dict[str, Any]]
    ) -> None:
        writes.insert_pending_calls(conn, rows)
        writes.set_status(conn, session_id, status)
        events: list[Event] = [
            (ApprovalRequestEvent if row["kind"] == "approval" else ClientToolRequestEvent)(
                tool_call_id=row["tool_call_id"], tool_name=row["tool_name"], input=row["input"]
            )
            for row in rows
        ]
        writes.append_events(conn, session_id, run, step, events)

    def _collect_answers(
        self, conn: Connection[Any], session_id: str, run: int, tool_call_ids: list[str]
    ) -> dict[str, Any]:
        row = writes.lock_session(conn, session_id)
        if row is None or row["run_count"] != run or row["status"] not in ACTIVE_STATUSES:
            return WaitState(run_ended=True).model_dump(mode="json")
        waiter = DBOS.workflow_id
        assert waiter is not None  # a transaction of the waiter workflow
        writes.follow_run_workflow(conn, waiter)
        return writes.collect_answers(conn, session_id, tool_call_ids).model_dump(mode="json")

    # --- the step commit: a plain transaction, idempotent on its own --------

    def commit_step(self, commit: StepCommit, memory: Sequence[MemoryWrite] = ()) -> CommitOutcome:
        """Commit one agent step, exactly once (retried on connection faults: a commit
        that went through before its connection broke is recognized, not repeated).
        The memory writes of the step's tools are applied in the same transaction, only
        when the step is written now (not on a replay, not when refused). A ``fresh``
        commit is made an ordinary one when some of the step's live events were sent,
        or when the stream turns out to hold one of its keys."""
        if self.live_events.committing(commit.session_id, commit.run, commit.step):
            commit = commit.model_copy(update={"fresh": False})
        try:
            return retry_transient(lambda: self._write_commit(commit, memory))
        except psycopg.errors.UniqueViolation as error:
            if not (commit.fresh and writes.stream_key_taken(error)):
                raise
            return retry_transient(lambda: self._write_commit(commit.model_copy(update={"fresh": False}), memory))

    def _write_commit(self, commit: StepCommit, memory: Sequence[MemoryWrite]) -> CommitOutcome:
        if not memory:
            with self.statements.connection() as conn:
                return writes.commit_step(conn, commit)
        with self.pool.connection() as conn, conn.transaction():
            outcome = writes.commit_step(conn, commit)
            if not outcome.replayed and outcome.refused is None:
                memories.apply_writes(conn, list(memory), commit.session_id, commit.run, commit.step)
            return outcome

    # --- the outcomes of tool calls, written and read by tool steps ----------

    def record_tool_outcome(self, row: RecordedOutcome) -> None:
        """Record how a call ended when no checkpoint will hold it (retried on connection faults)."""

        def write() -> None:
            with self.statements.connection() as conn:
                writes.record_tool_outcome(conn, row)

        retry_transient(write)

    def recorded_tool_outcome(self, session_id: str, step: int, tool_call_id: str, call_digest: str) -> dict[str, Any] | None:
        """The outcome recorded for this exact call, or None (retried on connection faults)."""

        def read() -> dict[str, Any] | None:
            with self.statements.connection() as conn:
                return reads.recorded_tool_outcome(conn, session_id, step, tool_call_id, call_digest)

        return retry_transient(read)

    # --- reads of workflow code (immutable history, so safe to repeat on replay) -------------

    def load_run_context(self, session_id: str, message_seq: int, step: int) -> RunContext:
        """Transcript and state as of the start of a run (retried on connection faults)."""

        def load() -> RunContext:
            with self.pool.connection() as conn:
                return _read_run_context(conn, session_id, message_seq, step)

        return retry_transient(load)


def _read_run_context(conn: Connection[Any], session_id: str, message_seq: int, step: int) -> RunContext:
    return reads.load_messages(conn, session_id, message_seq), reads.load_state(conn, session_id, step)


_runtime: AgentRuntime | None = None


def install_runtime(runtime: AgentRuntime) -> None:
    """Make ``runtime`` the one this process's workflows run with."""
    global _runtime
    _runtime = runtime


def current_runtime() -> AgentRuntime:
    if _runtime is None:
        raise HelixError("no DBOSAgentExecutor was created in this process before DBOS.launch()")
    return _runtime
