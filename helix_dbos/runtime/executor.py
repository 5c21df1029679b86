"""``DBOSAgentExecutor``: run agents as durable DBOS workflows inside your DBOS app.

Create it after ``DBOS(config=...)`` and before ``DBOS.launch()``, so its datasource
exists and recovered runs find their agents::

    DBOS(config={"name": "app", "system_database_url": url})
    executor = DBOSAgentExecutor(llm=LiteLLMAdapter(), database_url=url)
    executor.register(research_agent)
    DBOS.launch()

    handle = executor.execute(research_agent, "What is DBOS?")
    print(handle.result().output)
"""

from __future__ import annotations

import asyncio
import inspect
import json
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

from dbos import DBOS, SetEnqueueOptions, SetWorkflowID, SQLAlchemyDatasource
from dbos._error import DBOSQueueDeduplicatedError, DBOSWorkflowIDInUseError
from pydantic import BaseModel

from helix_dbos.agents import AgentConfig
from helix_dbos.database import resolve_database_url
from helix_dbos.errors import AgentNotRegisteredError, HelixError, SessionBusyError, SessionNotFoundError
from helix_dbos.llm import LLMAdapter, generate_with_retry
from helix_dbos.orchestration import find_unpaired_finish_call_id, synthesize_finish_tool_result
from helix_dbos.runtime import workflow
from helix_dbos.runtime.control import abort_tree
from helix_dbos.runtime.handle import AgentHandle
from helix_dbos.runtime.hitl import SubmitOutcome, ToolAnswer, submit_tool_result
from helix_dbos.runtime.hooks import fire_hook
from helix_dbos.runtime.loop import ToolJob
from helix_dbos.runtime.requests import RunRequest, RunStart, ToolOutcome, run_workflow_id
from helix_dbos.runtime.streaming import follow_events
from helix_dbos.runtime.subagents import sub_agents_of
from helix_dbos.state import StateTracker
from helix_dbos.store import reads, writes
from helix_dbos.store.migrations import migrate
from helix_dbos.store.records import EventRecord, PendingToolCall, RunRecord, SessionRecord, UsageSummary
from helix_dbos.tools import Tool, ToolContext
from helix_dbos.types import Message, StepResult, Usage, UserMessage


class DBOSAgentExecutor:
    """Runs registered agents as ``helix_agent_run`` workflows; one per process."""

    def __init__(
        self,
        llm: LLMAdapter,
        database_url: str | None = None,
        *,
        run_migrations: bool = True,
        default_queue: str | None = None,
    ) -> None:
        self.llm = llm
        self.default_queue = default_queue
        """Queue name ``execute`` enqueues on when it is given none (None: start in-process)."""
        self.database_url = resolve_database_url(database_url)
        if run_migrations:
            migrate(self.database_url)
        self.datasource = SQLAlchemyDatasource.create(self.database_url)
        self.engine = self.datasource.engine
        self._agents: dict[str, AgentConfig] = {}
        self._begin_tx = self.datasource.transaction(name="helix_begin_run", isolation_level="READ COMMITTED")(
            self._begin_run_body
        )
        self._commit_tx = self.datasource.transaction(name="helix_commit_step", isolation_level="READ COMMITTED")(
            self._commit_step_body
        )
        self._fail_tx = self.datasource.transaction(name="helix_fail_run", isolation_level="READ COMMITTED")(
            self._fail_run_body
        )
        self._suspend_tx = self.datasource.transaction(name="helix_suspend", isolation_level="READ COMMITTED")(
            self._suspend_body
        )
        workflow.install_executor(self)

    # --- agents -------------------------------------------------------------------------

    def register(self, *agents: AgentConfig) -> None:
        """Make agents runnable by name; register every agent before ``DBOS.launch()``."""
        for agent in agents:
            for each in (agent, *sub_agents_of(agent)):
                known = self._agents.get(each.name)
                if known is not None and known is not each:
                    raise HelixError(f"another agent named {each.name!r} is already registered")
                self._agents[each.name] = each

    def agent(self, name: str) -> AgentConfig:
        try:
            return self._agents[name]
        except KeyError:
            raise AgentNotRegisteredError(
                f"agent {name!r} is not registered in this process; call executor.register() before DBOS.launch()"
            ) from None

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
        DBOS queue and any worker listening on it runs it (see runtime/queues.py);
        ``priority`` orders queued runs (lower runs first).
        """
        config = self._registered(agent)
        if session_id is not None and not session_id.strip():
            raise HelixError("session_id must not be empty (leave it out to start a new session)")
        session_id = session_id or str(uuid.uuid4())
        row = self._session_row(session_id)
        self._check_startable(row, config, session_id)
        run = (row.run_count if row else 0) + 1
        request = RunRequest(session_id=session_id, run=run, agent_name=config.name, input=_input_text(input))
        return self._start(request, queue or self.default_queue, priority)

    def resume(self, agent: AgentConfig | str, session_id: str) -> AgentHandle:
        """Continue an interrupted (or failed, or aborted) session where it stopped."""
        config = self._registered(agent)
        row = self._session_row(session_id)
        if row is None:
            raise SessionNotFoundError(f"no session {session_id!r}")
        self._check_startable(row, config, session_id)
        if row.status == "completed":
            raise HelixError(f"session {session_id!r} is completed; call execute() with a new message to continue it")
        request = RunRequest(session_id=session_id, run=row.run_count + 1, agent_name=config.name, kind="resume")
        return self._start(request)

    def handle(self, session_id: str, run: int | None = None) -> AgentHandle:
        """A handle on run ``run`` (default: the latest) of a session."""
        row = self._require_session(session_id)
        if run is None:
            run = row.run_count
        elif not 1 <= run <= row.run_count:
            raise HelixError(f"session {session_id!r} has runs 1 to {row.run_count}; there is no run {run}")
        return AgentHandle(session_id, run, run_workflow_id(session_id, run))

    def _start(self, request: RunRequest, queue: str | None = None, priority: int | None = None) -> AgentHandle:
        workflow_id = run_workflow_id(request.session_id, request.run)
        try:
            # "reject": a caller that raced another one to this run number must not get
            # the other caller's run (its own input would be dropped without a word).
            with SetWorkflowID(workflow_id, workflow_id_reuse_policy="reject"):
                if queue is None:
                    started = DBOS.start_workflow(workflow.agent_run_workflow, request.model_dump(mode="json"))
                else:
                    # deduplication id = session: never two runs of a session at once, on any worker
                    with SetEnqueueOptions(deduplication_id=request.session_id, priority=priority):
                        started = DBOS.enqueue_workflow(queue, workflow.agent_run_workflow, request.model_dump(mode="json"))
        except (DBOSWorkflowIDInUseError, DBOSQueueDeduplicatedError):
            raise SessionBusyError(
                f"session {request.session_id!r} already has a run in progress (run {request.run} was just started)"
            ) from None
        # A run this process executes: result() waits on its task instead of polling the database.
        future = getattr(started, "future", None)
        return AgentHandle(
            request.session_id, request.run, workflow_id, _future=future if isinstance(future, Future) else None
        )

    def _check_startable(self, row: SessionRecord | None, config: AgentConfig, session_id: str) -> None:
        if row is None:
            return
        if row.agent_name != config.name:
            raise HelixError(f"session {session_id!r} belongs to agent {row.agent_name!r}, not {config.name!r}")
        if row.status in writes.ACTIVE_STATUSES:
            raise SessionBusyError(
                f"session {session_id!r} already has a run in progress (run {row.run_count}, status {row.status})"
            )

    # --- controlling runs from any process ---------------------------------------------------

    def interrupt(self, session_id: str) -> bool:
        """Ask a running session (and its running sub-agents) to stop after the current
        step (status ``interrupted``)."""
        self._require_session(session_id)
        with self.engine.begin() as conn:
            return any([writes.request_interrupt(conn, sid) for sid in reads.active_tree(conn, session_id)])

    def abort(self, session_id: str, reason: str = "aborted") -> bool:
        """Cancel the session's running workflow, and its sub-agents', now; runs end ``aborted``."""
        self._require_session(session_id)
        return abort_tree(self.engine, DBOS.cancel_workflow, session_id, reason)

    def submit_tool_result(self, session_id: str, answer: ToolAnswer) -> SubmitOutcome:
        """Answer a pending call: an :class:`ApprovalResponse` or a :class:`ClientToolResult`.

        Raises :class:`SessionNotFoundError`, :class:`ToolCallNotPendingError` (unknown call,
        a call that timed out or was cancelled with its run, or an answer of the wrong
        kind) or :class:`InvalidToolResultError`; a repeated answer returns
        ``status="already_answered"`` and changes nothing.
        """
        return submit_tool_result(self.engine, _dbos_send, session_id, answer)

    # --- reading ---------------------------------------------------------------------------

    def get_session(self, session_id: str, at_step: int | None = None) -> SessionRecord:
        """The session with its transcript, state (optionally as of ``at_step``) and pending calls."""
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

    def list_runs(self, session_id: str) -> list[RunRecord]:
        self._require_session(session_id)
        with self.engine.connect() as conn:
            return reads.list_runs(conn, session_id)

    def list_pending(self, session_id: str | None = None) -> list[PendingToolCall]:
        with self.engine.connect() as conn:
            return reads.list_pending(conn, session_id)

    def get_usage(self, session_id: str) -> UsageSummary:
        self._require_session(session_id)
        with self.engine.connect() as conn:
            return reads.usage_summary(conn, session_id)

    def stream(self, session_id: str, from_seq: int = 0, **options: Any) -> Iterator[EventRecord]:
        """Yield the session's durable events live (see :func:`follow_events` for options).

        A session whose first run was just started (its row is not written yet) counts
        as existing: the stream waits for its first events.
        """
        if self._session_row(session_id) is None and DBOS.get_workflow_status(run_workflow_id(session_id, 1)) is None:
            raise SessionNotFoundError(f"no session {session_id!r}")
        return follow_events(self.database_url, session_id, from_seq, engine=self.engine, **options)

    def _session_row(self, session_id: str) -> SessionRecord | None:
        with self.engine.connect() as conn:
            return reads.get_session_row(conn, session_id)

    def _require_session(self, session_id: str) -> SessionRecord:
        row = self._session_row(session_id)
        if row is None:
            raise SessionNotFoundError(f"no session {session_id!r}")
        return row

    def _registered(self, agent: AgentConfig | str) -> AgentConfig:
        if isinstance(agent, str):
            return self.agent(agent)
        if self._agents.get(agent.name) is not agent:
            self.register(agent)
        return agent

    # --- called by the workflow (see runtime/workflow.py and runtime/loop.py) ----------------

    def begin_run(self, request: RunRequest, initial_state: dict[str, Any]) -> RunStart:
        """The run's first transaction (checkpointed): claim the session, add the input."""
        return self._begin_tx(request, initial_state)

    def commit_step(self, payload: dict[str, Any]) -> dict[str, Any]:
        """One agent step's commit transaction (checkpointed)."""
        return self._commit_tx(payload)

    def fail_run(self, request: RunRequest, error: str) -> bool:
        return self._fail_tx(request, error)

    def suspend(self, session_id: str, run: int, step: int, status: str, rows: list[dict[str, Any]]) -> None:
        """Record a step's gated calls and the waiting status (checkpointed transaction)."""
        self._suspend_tx(session_id, run, step, status, rows)

    def evaluate_approval(self, jobs: list[ToolJob]) -> list[str]:
        """The body of the approval-gate step: ids of the calls whose predicate asks for approval."""
        needing = []
        for job in jobs:
            agent = self.agent(job.agent_name)
            tool = agent.get_tool(job.call.name)
            assert tool is not None
            ctx = ToolContext(job.session_id, job.call.id, agent.name, job.step, StateTracker(job.base_state))
            try:
                tool_input = tool.parse_input(job.call.arguments)
            except Exception:
                continue  # invalid input never runs: the tool step reports it
            if tool.needs_approval(tool_input, ctx):
                needing.append(job.call.id)
        return needing

    def session_events(self, session_id: str) -> list[dict[str, Any]]:
        """All events of a (finished) session, as plain data, to tag into its parent's stream."""
        with self.engine.connect() as conn:
            events = reads.events_after(conn, session_id, 0, limit=100_000)
        return [{"seq": e.seq, "type": e.type, "data": e.data} for e in events]

    def load_run_context(self, session_id: str, message_seq: int, step: int) -> tuple[list[Message], dict[str, Any]]:
        """Transcript and state as of the start of a run: immutable, so safe to replay."""
        with self.engine.connect() as conn:
            return reads.load_messages(conn, session_id, message_seq), reads.load_state(conn, session_id, step)

    async def call_llm(self, agent_name: str, messages: list[Message]) -> tuple[StepResult, Usage]:
        """The body of the LLM step; transient errors are retried inside it."""
        agent = self.agent(agent_name)
        return await generate_with_retry(
            self.llm, messages, agent.tool_specs(), agent.llm_config, agent.output_schema
        )

    async def run_tool(self, job: ToolJob) -> ToolOutcome:
        """The body of one tool step: validate input, run it, record its state writes."""
        agent = self.agent(job.agent_name)
        tool = agent.get_tool(job.call.name)
        assert tool is not None, "the loop only schedules known tools"
        started = time.perf_counter()
        events: list[dict[str, Any]] = []
        tracker = StateTracker(job.base_state, array_delta_mode=True, schema=agent.state_schema)
        ctx = ToolContext(job.session_id, job.call.id, agent.name, job.step, tracker, emit=_collector(events, job))
        outcome = ToolOutcome(tool_call_id=job.call.id, tool_name=tool.name, success=False)
        try:
            if job.call.parse_error is not None:
                raise ValueError(f"Invalid arguments for tool '{tool.name}': {job.call.parse_error}")
            tool_input = tool.parse_input(job.call.arguments)
            await fire_hook(agent.hooks, "before_tool", job.call, ctx)
            outcome.result = tool.dump_output(await _execute(tool, tool_input, ctx))
            outcome.writes = list(tracker.get_step_writes())
            outcome.success = True
        except Exception as exc:  # self-healing: the error becomes the tool's result
            outcome.error = str(exc) or type(exc).__name__
        outcome.ms = (time.perf_counter() - started) * 1000
        outcome.events = events
        if outcome.writes:
            await fire_hook(agent.hooks, "on_state_change", tracker.get_state(), ctx)
        return outcome

    # --- transaction bodies (run inside DBOS datasource transactions) ------------------------

    def _begin_run_body(self, request: RunRequest, initial_state: dict[str, Any]) -> RunStart:
        conn = self.datasource.sql_session().connection()
        sid = request.session_id
        row = writes.lock_session(conn, sid)
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
        elif row["status"] in writes.ACTIVE_STATUSES or row["run_count"] >= request.run:
            raise SessionBusyError(f"session {sid!r} already has a run in progress (run {row['run_count']})")
        writes.reopen_session(conn, sid, request.run)
        message_count = self._add_input_messages(conn, request, row)
        writes.insert_run(
            conn, session_id=sid, run=request.run, workflow_id=run_workflow_id(sid, request.run),
            kind=request.kind, start_step=row["step_count"], start_seq=row["event_seq"] + 1,
        )
        writes.append_events(
            conn, sid, request.run, row["step_count"],
            [{"type": "run_start", "data": {"run": request.run, "kind": request.kind, "input": request.input}}],
        )
        return RunStart(step_count=row["step_count"], message_seq=message_count, start_seq=row["event_seq"] + 1)

    def _add_input_messages(self, conn: Any, request: RunRequest, row: dict[str, Any]) -> int:
        """Heal a legacy dangling ``__finish__`` and append the user's message."""
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

    def _suspend_body(self, session_id: str, run: int, step: int, status: str, rows: list[dict[str, Any]]) -> None:
        conn = self.datasource.sql_session().connection()
        writes.insert_pending_calls(conn, rows)
        writes.set_status(conn, session_id, status)
        events = [
            {
                "type": "tool_approval_request" if row["kind"] == "approval" else "tool_start",
                "data": {"tool_call_id": row["tool_call_id"], "tool_name": row["tool_name"], "input": row["input"]},
            }
            for row in rows
        ]
        writes.append_events(conn, session_id, run, step - 1, events)

    def _commit_step_body(self, payload: dict[str, Any]) -> dict[str, Any]:
        return writes.commit_step(self.datasource.sql_session().connection(), payload)

    def _fail_run_body(self, request: RunRequest, error: str) -> bool:
        return writes.end_run(
            self.datasource.sql_session().connection(), session_id=request.session_id, run=request.run,
            status="failed", error=error, stop_reason="error", event={"type": "error", "data": {"error": error}},
        )


async def _execute(tool: Tool, tool_input: Any, ctx: ToolContext) -> Any:
    """Run the tool: async bodies on the loop, sync bodies on a worker thread."""
    if inspect.iscoroutinefunction(tool.execute):
        return await tool.run(tool_input, ctx)
    assert callable(tool.execute)
    result = await asyncio.to_thread(tool.execute, tool_input, ctx)
    return await result if inspect.isawaitable(result) else result


def _dbos_send(workflow_id: str, message: Any, topic: str, idempotency_key: str) -> None:
    DBOS.send(workflow_id, message, topic, idempotency_key=idempotency_key)


def _input_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return json.dumps(value, separators=(",", ":"))


def _collector(events: list[dict[str, Any]], job: ToolJob) -> Any:
    def emit(event_type: str, data: Any) -> None:
        events.append({"type": "custom", "data": {"name": event_type, "data": data, "tool_call_id": job.call.id}})

    return emit
