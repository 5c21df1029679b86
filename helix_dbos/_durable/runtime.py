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

import threading
from collections.abc import Iterable
from typing import Any, Final

from dbos import DBOS, SQLAlchemyDatasource

from helix_dbos.agents import AgentConfig
from helix_dbos._durable.children.companion_steps import CompanionSteps
from helix_dbos._durable.dbos_log import quiet_cancelled_runs
from helix_dbos._durable.payloads import RunRequest, RunStart, run_workflow_id
from helix_dbos._durable.tool_execution.held_outcomes import HeldOutcomes
from helix_dbos._durable.tool_execution.watch import RunWatch
from helix_dbos.errors import (
    AgentNotRegisteredError,
    ConfigurationError,
    HelixError,
    SessionBusyError,
    SessionNotFoundError,
)
from helix_dbos.events import ApprovalRequestEvent, ClientToolRequestEvent, ErrorEvent, Event, RunStartEvent, StepStartEvent
from helix_dbos.llm import LLMAdapter
from helix_dbos._logs import EventLog
from helix_dbos.orchestration import find_unpaired_finish_call_id, synthesize_finish_tool_result
from helix_dbos._store import reads, writes
from helix_dbos._store.delta_channels import DeltaPublisher
from helix_dbos._store.engine import create_statement_engine
from helix_dbos._store.live_events import LiveEventWriter
from helix_dbos._store.records import CommitOutcome, HookStateSave, KeyedEvent, RecordedOutcome, StepCommit, WaitState
from helix_dbos._store.retry import retry_transient
from helix_dbos.subagents import sub_agents_of
from helix_dbos.types import ACTIVE_STATUSES, Message, SessionStatus, UserMessage

_READ_COMMITTED: Final = "READ COMMITTED"


class AgentRuntime:
    """Agents by name, the LLM adapter, the log, and the checkpointed transactions of a run."""

    def __init__(self, llm: LLMAdapter, datasource: SQLAlchemyDatasource, log: EventLog | None = None) -> None:
        self.llm = llm
        self.log = log or EventLog()
        """Where workflow code writes its events (``helix_dbos._logs``)."""
        quiet_cancelled_runs(lambda: self.log)
        self.datasource = datasource
        self.engine = datasource.engine
        self._agents: dict[str, AgentConfig] = {}
        url = self.engine.url.render_as_string(hide_password=False)
        self.deltas = DeltaPublisher(url)
        """Publishes the LLM steps' token deltas (``_durable/streaming.py``)."""
        self.statements = create_statement_engine(url)
        """Single statements that commit on their own: the step commit, tool outcomes."""
        self.live_events = LiveEventWriter(url)
        """Writes the steps' keyed events as they happen (``_durable/streaming.py``)."""
        self.outcomes = HeldOutcomes(self.record_tool_outcome)
        """Tool outcomes until DBOS saves their steps' checkpoints (``_durable/tool_execution/held_outcomes.py``)."""
        self.run_watch = RunWatch(self.engine)
        """Tells this process's running tools when their run is interrupted or aborted."""
        self._began: set[str] = set()
        self._began_lock = threading.Lock()
        transaction = datasource.transaction
        self.begin_run = transaction(name="helix_begin_run", isolation_level=_READ_COMMITTED)(self._begin_run)
        """``begin_run(request, initial_state) -> RunStart`` (as JSON): claim the session, add the input."""
        self.continue_run = transaction(name="helix_continue_run", isolation_level=_READ_COMMITTED)(
            self._continue_run
        )
        """``continue_run(request) -> RunStart`` (as JSON): check that the parked run still
        holds its session at its parked step (``refused`` otherwise: it was aborted)."""
        self.claim_child = transaction(name="helix_claim_child", isolation_level=_READ_COMMITTED)(
            self._claim_child
        )
        """``claim_child(request) -> refusal``: create a sub-agent's session for its parent's
        call before its workflow starts (None), or say why that session is not the call's."""
        self.save_hook_state = transaction(name="helix_save_hook_state", isolation_level=_READ_COMMITTED)(
            self._save_hook_state
        )
        """``save_hook_state(save) -> patch | None``: what the hooks of a committed step
        wrote, once (None: the session moved on, nothing written)."""
        self.fail_run = transaction(name="helix_fail_run", isolation_level=_READ_COMMITTED)(self._fail_run)
        """``fail_run(request, error) -> ended``: end a run that raised."""
        self.suspend = transaction(name="helix_suspend", isolation_level=_READ_COMMITTED)(self._suspend)
        """``suspend(session_id, run, step, status, rows)``: record a step's gated calls
        and their deadlines."""
        self.collect_answers = transaction(name="helix_collect_answers", isolation_level=_READ_COMMITTED)(
            self._collect_answers
        )
        """``collect_answers(session_id, run, tool_call_ids) -> WaitState`` (as JSON): the
        calls answered in time or timed out, how long until the next deadline, and whether
        the run still holds the session."""
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

    # --- transaction bodies (each runs inside a DBOS datasource transaction) ------------------

    def _connection(self) -> Any:
        return self.datasource.sql_session().connection()

    def first_execution(self, workflow_id: str) -> bool:
        """Whether ``begin_run`` of this workflow ran in this process just now rather than
        returning its checkpoint: then this is the workflow's first execution, and none of
        its later steps ran before (asked once, right after ``begin_run``)."""
        with self._began_lock:
            if workflow_id in self._began:
                self._began.remove(workflow_id)
                return True
            return False

    def _begin_run(self, request: RunRequest, initial_state: dict[str, Any]) -> dict[str, Any]:
        conn = self._connection()
        placement = reads.workflow_placement(conn, request.workflow_id)
        if placement is None:
            raise ConfigurationError(
                "helix's database is not DBOS's system database: helix keeps its tables next to DBOS's so that an"
                " answer and the message that delivers it commit together. Give DBOS(config=...)"
                " system_database_url and DBOSAgentExecutor(database_url=...) the same URL"
            )
        sid = request.session_id
        row = writes.lock_session(conn, sid)
        if row is not None and request.parent_session_id is not None:
            owner = (row["parent_session_id"], row["parent_tool_call_id"])
            if owner != (request.parent_session_id, request.parent_tool_call_id):
                return RunStart(refused=_not_the_child(request, owner)).model_dump(mode="json")
        if row is None:
            if request.kind == "resume":
                raise SessionNotFoundError(f"no session {sid!r}")
            writes.insert_session(
                conn, session_id=sid, agent_name=request.agent_name, initial_state=initial_state,
                root_session_id=request.root_session_id or sid, parent_session_id=request.parent_session_id,
                parent_tool_call_id=request.parent_tool_call_id,
            )
            row = writes.lock_session(conn, sid)
            assert row is not None
        elif not _claimed_for(request, row) and (row["status"] in ACTIVE_STATUSES or row["run_count"] >= request.run):
            raise SessionBusyError(f"session {sid!r} already has a run in progress (run {row['run_count']})")
        writes.reopen_session(conn, sid, request.run)
        message_count = _add_input_messages(conn, request, row)
        writes.insert_run(
            conn, session_id=sid, run=request.run, workflow_id=run_workflow_id(sid, request.run),
            kind=request.kind, start_step=row["step_count"], start_seq=row["event_seq"] + 1,
        )
        writes.append_events(
            conn, sid, request.run, row["step_count"],
            [RunStartEvent(run=request.run, kind=request.kind, input=request.input)],
        )
        first = row["step_count"] + 1  # the first step's step_start; the next ones come with each commit
        writes.append_keyed_events(
            conn, sid, request.run, first, [KeyedEvent.at(request.run, first, "step_start", StepStartEvent(step=first))]
        )
        start = RunStart(
            step_count=row["step_count"], message_seq=message_count, start_seq=row["event_seq"] + 1,
            queue=placement.queue,
        )
        self._mark_began(request.workflow_id)
        return start.model_dump(mode="json")

    def _continue_run(self, request: RunRequest) -> dict[str, Any]:
        parked = request.parked
        assert parked is not None
        row = writes.lock_session(self._connection(), request.session_id)
        where = (request.run, parked.step - 1)
        if row is None or row["status"] not in ACTIVE_STATUSES or (row["run_count"], row["step_count"]) != where:
            now = "gone" if row is None else f"{row['status']} at run {row['run_count']}, step {row['step_count']}"
            refused = (
                f"run {request.run} of session {request.session_id!r} no longer waits at step {parked.step}"
                f" (the session is {now}); its continuation changed nothing"
            )
            return RunStart(refused=refused).model_dump(mode="json")
        self._mark_began(request.workflow_id)
        start = RunStart(step_count=row["step_count"], message_seq=row["message_count"], queue=parked.queue)
        return start.model_dump(mode="json")

    def _mark_began(self, workflow_id: str) -> None:
        with self._began_lock:
            self._began.add(workflow_id)

    def _claim_child(self, request: RunRequest) -> str | None:
        assert request.parent_session_id is not None and request.parent_tool_call_id is not None
        return writes.claim_child_session(
            self._connection(), session_id=request.session_id, agent_name=request.agent_name,
            initial_state=self.agent(request.agent_name).initial_state(),
            root_session_id=request.root_session_id or request.parent_session_id,
            parent_session_id=request.parent_session_id, parent_tool_call_id=request.parent_tool_call_id,
            first_workflow_id=run_workflow_id(request.session_id, 1),
        )

    def _save_hook_state(self, save: HookStateSave) -> list[dict[str, Any]] | None:
        return writes.save_hook_state(self._connection(), save)

    def _fail_run(self, request: RunRequest, error: str) -> bool:
        return writes.end_run(
            self._connection(), session_id=request.session_id, run=request.run, status="failed", error=error,
            stop_reason="error", event=ErrorEvent(error=error, stop_reason="error"),
        )

    def _suspend(
        self, session_id: str, run: int, step: int, status: SessionStatus, rows: list[dict[str, Any]]
    ) -> None:
        conn = self._connection()
        writes.insert_pending_calls(conn, rows)
        writes.set_status(conn, session_id, status)
        events: list[Event] = [
            (ApprovalRequestEvent if row["kind"] == "approval" else ClientToolRequestEvent)(
                tool_call_id=row["tool_call_id"], tool_name=row["tool_name"], input=row["input"]
            )
            for row in rows
        ]
        writes.append_events(conn, session_id, run, step, events)

    def _collect_answers(self, session_id: str, run: int, tool_call_ids: list[str]) -> dict[str, Any]:
        conn = self._connection()
        row = writes.lock_session(conn, session_id)
        if row is None or row["run_count"] != run or row["status"] not in ACTIVE_STATUSES:
            return WaitState(run_ended=True).model_dump(mode="json")
        return writes.collect_answers(conn, session_id, tool_call_ids).model_dump(mode="json")

    # --- the step commit: a plain transaction, idempotent on its own --------

    def commit_step(self, commit: StepCommit) -> CommitOutcome:
        """Commit one agent step, exactly once (retried on connection faults: a commit
        that went through before its connection broke is recognized, not repeated)."""

        def write() -> CommitOutcome:
            with self.statements.connect() as conn:
                return writes.commit_step(conn, commit)

        return retry_transient(write)

    # --- the outcomes of tool calls, written and read by tool steps ----------

    def record_tool_outcome(self, row: RecordedOutcome) -> None:
        """Record how a call ended when no checkpoint will hold it (retried on connection faults)."""

        def write() -> None:
            with self.statements.connect() as conn:
                writes.record_tool_outcome(conn, row)

        retry_transient(write)

    def recorded_tool_outcome(self, session_id: str, step: int, tool_call_id: str, call_digest: str) -> dict[str, Any] | None:
        """The outcome recorded for this exact call, or None (retried on connection faults)."""

        def read() -> dict[str, Any] | None:
            with self.statements.connect() as conn:
                return reads.recorded_tool_outcome(conn, session_id, step, tool_call_id, call_digest)

        return retry_transient(read)

    # --- reads of workflow code (immutable history, so safe to repeat on replay) -------------

    def load_run_context(self, session_id: str, message_seq: int, step: int) -> tuple[list[Message], dict[str, Any]]:
        """Transcript and state as of the start of a run (retried on connection faults)."""

        def load() -> tuple[list[Message], dict[str, Any]]:
            with self.engine.connect() as conn:
                return reads.load_messages(conn, session_id, message_seq), reads.load_state(conn, session_id, step)

        return retry_transient(load)


def _claimed_for(request: RunRequest, row: dict[str, Any]) -> bool:
    """The row is a sub-agent session its parent claimed for this run, not yet begun."""
    return request.parent_session_id is not None and row["run_count"] == 0 and row["status"] == SessionStatus.ACTIVE


def _not_the_child(request: RunRequest, owner: tuple[str | None, str | None]) -> str:
    parent, call = owner
    recorded = f"the session of call {call!r} of {parent!r}" if parent else "not a sub-agent session"
    return (
        f"session {request.session_id!r} is not a sub-agent session of {request.parent_session_id!r}"
        f" (call {request.parent_tool_call_id!r}): it is {recorded}; this run changed nothing"
    )


def _add_input_messages(conn: Any, request: RunRequest, row: dict[str, Any]) -> int:
    """Pair a ``__finish__`` call the history left without a result, and append the user's message."""
    new: list[Message] = []
    if request.kind == "execute" and row["message_count"] > 0:
        dangling = find_unpaired_finish_call_id(reads.load_messages_since_last_assistant(conn, request.session_id))
        if dangling is not None:
            new.append(synthesize_finish_tool_result(dangling))
    if request.input is not None:
        new.append(UserMessage(content=request.input))
    if not new:
        return int(row["message_count"])
    return writes.append_messages(conn, request.session_id, request.run, row["step_count"], new)


_runtime: AgentRuntime | None = None


def install_runtime(runtime: AgentRuntime) -> None:
    """Make ``runtime`` the one this process's workflows run with."""
    global _runtime
    _runtime = runtime


def current_runtime() -> AgentRuntime:
    if _runtime is None:
        raise HelixError("no DBOSAgentExecutor was created in this process before DBOS.launch()")
    return _runtime
