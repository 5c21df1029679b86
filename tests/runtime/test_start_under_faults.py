"""Starting and answering runs while the database's connections are being killed.

A thread terminates every other backend of the test's own database (never another
database) every ``STORM_EVERY`` seconds while this process starts runs
(``executor.execute``), enqueues them (:class:`RunEnqueuer`) and answers approvals
(``executor.submit_tool_result``, ``admin.approve``). Each call does its work or raises
a :class:`HelixError`, never a driver error, and no call makes two runs or takes an
answer twice.

A killed connection hits a call only when it dies mid-statement (a pool replaces the
idle ones it finds dead), so after its first calls each test goes on with calls that
are mostly a read: starting the session whose run is held in progress, answering an
approval again. They go on until one of them was retried (helix logs each retry): every
storm test proves it met the fault.

Then the two ways a retry meets its own earlier attempt, provoked one at a time: a start
whose workflow was inserted although its caller saw a connection error, and an answer
whose commit went through although its connection broke.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import psycopg
import pytest
import sqlalchemy as sa
from dbos import DBOS, SetWorkflowID
from pydantic import BaseModel

from helix_dbos import AgentHooks, ApprovalResponse, HelixError, SessionBusyError, ToolContext, define_agent, define_tool
from helix_dbos import admin
from helix_dbos._client import commands
from helix_dbos._client.handle import AgentHandle
from helix_dbos._client.queues import EnqueuedRun, QueueSettings, RunEnqueuer, register_queue
from helix_dbos._client.workflows import ClientWorkflows, LocalWorkflows
from helix_dbos._database import libpq_url, render_url
from helix_dbos._durable.payloads import RunRequest
from helix_dbos._durable.workflow import agent_run_workflow
from backends import database_clock, terminate_other_backends, wait_for_dbos_listener
from runtime_testkit import RESULT_TIMEOUT, call, calls, rows, text, unique, use_model, user_input, wait_for

T = TypeVar("T")

STORM_EVERY = 0.3
"""Seconds between two rounds of killing every other backend of the test database."""
CALLS = 8
"""Calls each storm test makes at least."""
STORM_BUDGET = 30.0
"""Seconds a storm test goes on calling, at most, until one of its calls was retried."""
STORM_RESULT_TIMEOUT = 120.0
"""Runs of a storm finish late: DBOS backs off on lost connections, and an answer sent while
DBOS's LISTEN connection was down wakes its waiter at DBOS's next re-check (every 60 s)."""
RETRY_LOG = "transient database error"
"""How ``helix_dbos._store.retry.retry_transient`` logs a retry."""


# --- the storm --------------------------------------------------------------------------------


class Storm:
    """A thread that terminates every other backend of the database at ``url`` (this
    test's own) every ``every`` seconds, DBOS's and helix's pooled connections included."""

    def __init__(self, url: str, every: float = STORM_EVERY) -> None:
        self.url = url
        self.every = every
        self.killed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="storm", daemon=True)

    def __enter__(self) -> Storm:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        """Stop; a last round waits for the backends to be gone, then for DBOS to listen
        again, so that what is sent next reaches this process's waiters."""
        self._stop.set()
        self._thread.join()
        since = database_clock(self.url)
        terminate_other_backends(self.url)
        wait_for_dbos_listener(self.url, since)

    def _run(self) -> None:
        with psycopg.connect(libpq_url(self.url), autocommit=True) as conn:
            while not self._stop.wait(self.every):
                self.killed += conn.execute(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                ).fetchone()[0]


def retries_in_this_thread(caplog: pytest.LogCaptureFixture) -> int:
    """Retries helix logged from the calling thread (runs retry in DBOS's threads)."""
    me = threading.get_ident()
    return sum(1 for r in caplog.records if r.thread == me and r.getMessage().startswith(RETRY_LOG))


def calls_in_a_storm(
    caplog: pytest.LogCaptureFixture, url: str, make_call: Callable[[int], T]
) -> list[T | HelixError]:
    """``make_call(i)`` for i = 0, 1, ... while a :class:`Storm` runs: ``CALLS`` calls,
    and more until one of them was retried (for ``STORM_BUDGET`` seconds at most). A
    HelixError is an outcome; any other exception fails the test."""
    outcomes: list[T | HelixError] = []
    deadline = time.monotonic() + STORM_BUDGET
    with caplog.at_level(logging.WARNING, logger="helix_dbos"), Storm(url) as storm:
        while len(outcomes) < CALLS or (not retries_in_this_thread(caplog) and time.monotonic() < deadline):
            try:
                outcomes.append(make_call(len(outcomes)))
            except HelixError as exc:
                outcomes.append(exc)
    assert storm.killed > 0, "the storm killed no connection"
    assert retries_in_this_thread(caplog) > 0, f"none of {len(outcomes)} calls met a killed connection"
    return outcomes


def run_workflows(executor: Any, session_id: str) -> list[str]:
    """The ids of the session's run workflows in DBOS (not their waiters and continuations)."""
    found = rows(executor, "SELECT workflow_uuid FROM dbos.workflow_status WHERE workflow_uuid LIKE %(p)s",
                 p=f"helix:{session_id}:run:%")
    return sorted(r["workflow_uuid"] for r in found if re.fullmatch(r"helix:.+:run:\d+", r["workflow_uuid"]))


def run_numbers(executor: Any, session_id: str) -> list[int]:
    """The session's run numbers in ``helix.runs``."""
    return [r["run"] for r in rows(executor, "SELECT run FROM helix.runs WHERE session_num = helix.session_num(%(s)s) ORDER BY run",
                                   s=session_id)]


def assert_one_run_or_none(executor: Any, session_id: str, outcome: Any) -> None:
    """A call that handed out a run made exactly that run; a refused call made at most one."""
    workflows = run_workflows(executor, session_id)
    if isinstance(outcome, HelixError):
        assert len(workflows) <= 1, (session_id, outcome, workflows)
        return
    assert workflows == [f"helix:{session_id}:run:1"], (session_id, workflows)
    assert run_numbers(executor, session_id) == [1]


# --- starting runs in a storm ----------------------------------------------------------------


class Nothing(BaseModel):
    pass


class Hold:
    """A ``hold`` tool that keeps its run in progress until the test releases it (a minute
    at most, so a failed test never leaves a run behind)."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.released = threading.Event()

    def tool(self) -> Any:
        def execute(_: Nothing, ctx: ToolContext) -> dict[str, Any]:
            self.entered.set()
            if not self.released.wait(60):
                raise TimeoutError("the test never released the run")
            return {"held": True}

        return define_tool("hold", "Wait until released.", Nothing, execute)


def held_or_done(messages: Any) -> dict[str, Any]:
    """The first step of the storm tests' model: the held session calls ``hold``, every
    other session answers at once."""
    return calls(call("h1", "hold")) if user_input(messages) == "hold" else text("done")


@contextmanager
def held_session(executor: Any, agent: Any, hold: Hold) -> Iterator[AgentHandle]:
    """A run of ``agent`` held in progress inside its ``hold`` tool; released on exit."""
    handle = executor.execute(agent, "hold")
    try:
        assert hold.entered.wait(RESULT_TIMEOUT), "the held run never reached its tool"
        yield handle
    finally:
        hold.released.set()


def assert_held_once(executor: Any, held: AgentHandle, refused: list[Any]) -> None:
    """Every call on the held session was refused, and it has its one run, completed."""
    assert all(isinstance(o, HelixError) for o in refused), [o for o in refused if not isinstance(o, HelixError)]
    assert held.result(timeout=STORM_RESULT_TIMEOUT).status == "completed"
    assert run_workflows(executor, held.session_id) == [held.workflow_id]


class SyncCaller:
    """``executor.execute`` and ``handle.result``, as a thread calls them."""

    start = "start_workflow"
    """The DBOS call that starts a run's workflow."""

    @staticmethod
    def losing(real: Callable[..., Any], lose: Callable[[Any], Any]) -> Callable[..., Any]:
        """``real`` (the DBOS start), its handle passed through ``lose``."""
        return lambda *args, **kwargs: lose(real(*args, **kwargs))

    def __init__(self, executor: Any) -> None:
        self.executor = executor

    def execute(self, agent: Any, input: str, session_id: str) -> AgentHandle:
        return self.executor.execute(agent, input, session_id=session_id)

    def result(self, handle: AgentHandle) -> Any:
        return handle.result(timeout=STORM_RESULT_TIMEOUT)

    def close(self) -> None:
        pass


class AsyncCaller(SyncCaller):
    """``await executor.execute_async`` and ``await handle.result_async``, on one event loop
    of this thread (the runs it starts go on while it runs)."""

    start = "start_workflow_async"

    @staticmethod
    def losing(real: Callable[..., Any], lose: Callable[[Any], Any]) -> Callable[..., Any]:
        async def start(*args: Any, **kwargs: Any) -> Any:
            return lose(await real(*args, **kwargs))

        return start

    def __init__(self, executor: Any) -> None:
        super().__init__(executor)
        self.runner = asyncio.Runner()

    def execute(self, agent: Any, input: str, session_id: str) -> AgentHandle:
        return self.runner.run(self.executor.execute_async(agent, input, session_id=session_id))

    def result(self, handle: AgentHandle) -> Any:
        return self.runner.run(handle.result_async(timeout=STORM_RESULT_TIMEOUT))

    def close(self) -> None:
        self.runner.run(self.executor.close_async())
        self.runner.close()


@pytest.mark.parametrize("caller", [SyncCaller, AsyncCaller])
def test_execute_in_a_storm_hands_out_one_run_or_raises_a_helix_error(
    executor: Any, database_url: str, caplog: pytest.LogCaptureFixture, caller: type[SyncCaller]
) -> None:
    hold = Hold()
    agent = define_agent(unique("storm-execute"), tools=[hold.tool()])
    use_model(executor, held_or_done, text("done"))
    session_ids: list[str] = []
    api = caller(executor)

    with held_session(executor, agent, hold) as held:

        def start(i: int) -> AgentHandle:
            """A new session's first run, then (all but a read) a new turn of the held session."""
            session_ids.append(unique(f"storm-execute-{i}") if i < CALLS else held.session_id)
            return api.execute(agent, f"call {i}", session_ids[-1])

        outcomes = calls_in_a_storm(caplog, database_url, start)

    assert_held_once(executor, held, outcomes[CALLS:])
    assert any(isinstance(o, AgentHandle) for o in outcomes)
    for session_id, outcome in zip(session_ids[:CALLS], outcomes):
        if isinstance(outcome, AgentHandle):
            assert (outcome.session_id, outcome.run) == (session_id, 1)
            result = api.result(outcome)
            assert (result.status, result.output) == ("completed", "done")
        assert_one_run_or_none(executor, session_id, outcome)
    api.close()


@pytest.fixture(scope="module")
def storm_queue(executor: Any) -> str:
    """A queue this test process's DBOS works on."""
    name = unique("storm-queue")
    register_queue(QueueSettings(name=name, polling_interval_sec=0.1))
    return name


def test_enqueue_in_a_storm_enqueues_one_run_or_raises_a_helix_error(
    executor: Any, database_url: str, storm_queue: str, caplog: pytest.LogCaptureFixture
) -> None:
    hold = Hold()
    agent = define_agent(unique("storm-enqueue"), tools=[hold.tool()])
    use_model(executor, held_or_done, text("done"))
    session_ids: list[str] = []

    with RunEnqueuer(database_url, queue=storm_queue) as enqueuer:
        with held_session(executor, agent, hold) as held:

            def enqueue(i: int) -> EnqueuedRun:
                """A new session's first run, then (all but a read) a new turn of the held session."""
                session_ids.append(unique(f"storm-enqueue-{i}") if i < CALLS else held.session_id)
                return enqueuer.enqueue(agent.name, f"call {i}", session_id=session_ids[-1])

            outcomes = calls_in_a_storm(caplog, database_url, enqueue)

        assert_held_once(executor, held, outcomes[CALLS:])
        assert any(isinstance(o, EnqueuedRun) for o in outcomes)
        for session_id, outcome in zip(session_ids[:CALLS], outcomes):
            if isinstance(outcome, EnqueuedRun):
                assert (outcome.session_id, outcome.run) == (session_id, 1)
                result = enqueuer.result(outcome, timeout=STORM_RESULT_TIMEOUT)
                assert (result.status, result.output) == ("completed", "done")
            assert_one_run_or_none(executor, session_id, outcome)


# --- answering approvals in a storm ----------------------------------------------------------


class Refund(BaseModel):
    amount: int


class Ledger:
    """An approval-gated refund tool that records the session of each real run."""

    def __init__(self) -> None:
        self.ran: list[str] = []

    def tool(self) -> Any:
        def execute(args: Refund, ctx: ToolContext) -> dict[str, Any]:
            self.ran.append(ctx.session_id)
            return {"refunded": args.amount}

        return define_tool("refund", "Refund an order.", Refund, execute, require_approval=True)


def parked_sessions(executor: Any, agent: Any, count: int) -> list[AgentHandle]:
    """``count`` runs of ``agent``, each waiting for the approval of its call ``c1``."""
    handles = [executor.execute(agent, "refund please") for _ in range(count)]
    for handle in handles:
        awaits_approval(executor, handle.session_id)
    return handles


def awaits_approval(executor: Any, session_id: str) -> None:
    """Wait until the session's call ``c1``, and only it, waits for an answer."""
    wait_for(lambda: [p.tool_call_id for p in executor.list_pending(session_id)] == ["c1"],
             what=f"the approval of {session_id}")


def assert_taken_once(outcomes: list[str | HelixError]) -> None:
    """The outcomes of one call's answers, in order: the first that did not raise is
    ``accepted`` and every later one ``already_answered``; only after a call that raised
    (it may have recorded its answer) may none be ``accepted``."""
    statuses = [o for o in outcomes if not isinstance(o, HelixError)]
    assert set(statuses) <= {"accepted", "already_answered"}, outcomes
    if "accepted" in statuses:
        assert statuses[0] == "accepted" and statuses.count("accepted") == 1, outcomes
    else:
        assert isinstance(outcomes[0], HelixError), outcomes


def test_approvals_in_a_storm_are_taken_once_each_or_raise_a_helix_error(
    executor: Any, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    ledger = Ledger()
    agent = define_agent(unique("storm-approve"), tools=[ledger.tool()])
    use_model(executor, calls(call("c1", "refund", {"amount": 5})), text("refunded"))
    handles = parked_sessions(executor, agent, CALLS)
    approval = ApprovalResponse(tool_call_id="c1", approved=True, approver="storm")
    answered: list[str] = []

    def approve(i: int) -> str:
        """Each session's first answer, then answers again until a retry was seen; half
        of them through the executor, half through the URL-only admin API."""
        session_id = handles[i % len(handles)].session_id
        answered.append(session_id)
        if i % 2:
            return admin.approve(database_url, session_id, "c1", approver="storm").status
        return executor.submit_tool_result(session_id, approval).status

    outcomes = calls_in_a_storm(caplog, database_url, approve)

    for handle in handles:
        mine = [o for s, o in zip(answered, outcomes) if s == handle.session_id]
        assert_taken_once(mine + [executor.submit_tool_result(handle.session_id, approval).status])
        assert handle.result(timeout=STORM_RESULT_TIMEOUT).status == "completed"
        answers = rows(executor, "SELECT answered_by FROM helix.tool_call_answers WHERE session_num = helix.session_num(%(s)s)",
                       s=handle.session_id)
        assert answers == [{"answered_by": "storm"}]
    assert sorted(ledger.ran) == sorted(h.session_id for h in handles)


# --- a retry that meets its own earlier attempt ----------------------------------------------


def lost_connection_error(url: str) -> sa.exc.OperationalError:
    """The error a caller of DBOS (which runs on SQLAlchemy) sees when the server ends its
    connection mid-call: a real one, from a connection whose backend was just terminated."""
    engine = sa.create_engine(render_url(url, drivername="postgresql+psycopg"), poolclass=sa.NullPool)
    try:
        with engine.connect() as conn:
            pid = conn.execute(sa.text("SELECT pg_backend_pid()")).scalar_one()
            terminate_other_backends(url, "pid = %s", pid)
            try:
                conn.execute(sa.text("SELECT 1"))
            except sa.exc.OperationalError as exc:
                return exc
    finally:
        engine.dispose()
    raise AssertionError("the terminated connection still answered")


def request_for(executor: Any, agent: Any, input: str = "go") -> RunRequest:
    """The request of a new session's first run (nothing written yet)."""
    executor.register(agent)
    return commands.plan_run(executor.pool, agent.name, input)


def start_workflow(request: RunRequest) -> Any:
    """Start the request's workflow as the executor does, refusing a taken id."""
    with SetWorkflowID(request.workflow_id, workflow_id_reuse_policy="reject"):
        return DBOS.start_workflow(agent_run_workflow, request.model_dump(mode="json"))


@pytest.mark.parametrize("caller", [SyncCaller, AsyncCaller])
def test_a_start_retried_after_its_workflow_was_inserted_hands_out_that_run(
    executor: Any, database_url: str, monkeypatch: pytest.MonkeyPatch, caller: type[SyncCaller]
) -> None:
    agent = define_agent(unique("lost-start"))
    use_model(executor, text("started once"))
    lost: list[str] = []

    def lose_the_first_answer(started: Any) -> Any:
        if not lost:
            lost.append(started.get_workflow_id())
            raise lost_connection_error(database_url)
        return started

    monkeypatch.setattr(DBOS, caller.start, caller.losing(getattr(DBOS, caller.start), lose_the_first_answer))
    session_id = unique("lost-start")
    api = caller(executor)
    handle = api.execute(agent, "go", session_id)
    result = api.result(handle)
    api.close()

    assert lost == [f"helix:{session_id}:run:1"]
    assert (handle.session_id, handle.run, handle.workflow_id) == (session_id, 1, lost[0])
    assert result.output == "started once"
    assert run_workflows(executor, session_id) == lost
    assert run_numbers(executor, session_id) == [1]


def test_an_async_start_waits_for_the_previous_queued_run_to_let_go_of_the_session(
    executor: Any, storm_queue: str
) -> None:
    """A queued run holds its session as DBOS deduplication id until its workflow returns;
    here its ``on_agent_complete`` hook keeps it from returning for a second after the
    session completed, and the next turn, started then, is not refused."""

    async def linger(result: Any, ctx: Any) -> None:
        if result.output == "one":
            await asyncio.sleep(1.0)

    agent = define_agent(unique("async-next-turn"), hooks=AgentHooks(on_agent_complete=linger))
    use_model(executor, text("one"), text("two"))
    session_id = unique("async-next-turn")

    async def main() -> tuple[str | None, Any]:
        first = await executor.execute_async(agent, "one", session_id=session_id, queue=storm_queue)
        while (row := await executor.live().session_row(session_id)) is None or row.status != "completed":
            await asyncio.sleep(0.01)
        still = await DBOS.get_workflow_status_async(first.workflow_id)
        second = await executor.execute_async(agent, "two", session_id=session_id, queue=storm_queue)
        result = await second.result_async(timeout=RESULT_TIMEOUT)
        await executor.close_async()
        return (still.status if still else None), result

    first_status, result = asyncio.run(main())

    assert first_status == "PENDING"  # run 1's workflow had not returned: the case under test
    assert result.output == "two"
    assert run_numbers(executor, session_id) == [1, 2]


def test_a_retried_start_that_finds_another_request_in_its_place_is_busy(executor: Any, database_url: str) -> None:
    agent = define_agent(unique("taken-start"))
    use_model(executor, text("theirs"))
    mine = request_for(executor, agent, "mine")
    theirs = mine.model_copy(update={"input": "theirs"})
    attempts: list[int] = []

    def another_caller_wins_between_my_attempts() -> Any:
        attempts.append(1)
        if len(attempts) == 1:
            start_workflow(theirs).get_result()
            raise lost_connection_error(database_url)
        return start_workflow(mine)

    with LocalWorkflows(database_url) as workflows, pytest.raises(SessionBusyError):
        commands.start_run(workflows, mine, another_caller_wins_between_my_attempts)
    assert len(attempts) == 2
    assert executor.get_session(mine.session_id).messages[0].content == "theirs"


def test_a_first_start_that_finds_its_twin_in_place_is_busy(executor: Any) -> None:
    """Without a failed attempt of its own, a workflow with the same input is another
    caller's (two callers sent the same message): the second one is told so."""
    agent = define_agent(unique("twin-start"))
    use_model(executor, text("once"))
    request = request_for(executor, agent)
    start_workflow(request).get_result()

    with LocalWorkflows(executor.database_url) as workflows, pytest.raises(SessionBusyError):
        commands.start_run(workflows, request, lambda: start_workflow(request))


@pytest.mark.parametrize("kind", [LocalWorkflows, ClientWorkflows])
def test_a_workflow_tells_the_request_it_was_started_with(executor: Any, kind: type[ClientWorkflows]) -> None:
    agent = define_agent(unique("which-request"))
    use_model(executor, text("read back"))
    request = request_for(executor, agent, "the very input")
    start_workflow(request).get_result()

    with kind(executor.database_url) as workflows:
        assert workflows.run_request(request.workflow_id) == request
        assert workflows.run_request(request.workflow_id) != request.model_copy(update={"input": "another input"})
        assert workflows.run_request(f"helix:{unique('nobody')}:run:1") is None


class CommitThenDisconnect(psycopg.Connection):  # type: ignore[type-arg]
    """A connection whose commit, once ``armed``, goes through and then loses the
    connection (the server ends it): the caller gets the driver's error for a transaction
    that committed."""

    armed = threading.Event()
    url = ""
    """The database the connections are made to (set by :func:`workflows_losing_a_commit`)."""

    def commit(self) -> None:
        super().commit()
        if CommitThenDisconnect.armed.is_set():
            CommitThenDisconnect.armed.clear()
            terminate_other_backends(CommitThenDisconnect.url, "pid = %s", self.info.backend_pid)
            self.execute("SELECT 1")  # the server ended this connection: raises


@contextmanager
def workflows_losing_a_commit(url: str) -> Iterator[LocalWorkflows]:
    """Workflows on ``url`` whose next transaction (the one an answer is recorded and sent
    in) commits, once ``CommitThenDisconnect.armed`` is set, and then fails with a lost
    connection."""
    CommitThenDisconnect.url = url
    with LocalWorkflows(url) as workflows:
        workflows._engine = sa.create_engine(
            render_url(url, drivername="postgresql+psycopg"), creator=lambda: CommitThenDisconnect.connect(libpq_url(url))
        )
        try:
            yield workflows
        finally:
            CommitThenDisconnect.armed.clear()


def test_an_answer_whose_commit_went_through_before_its_connection_broke_is_accepted(
    executor: Any, database_url: str
) -> None:
    ledger = Ledger()
    agent = define_agent(unique("lost-answer"), tools=[ledger.tool()])
    use_model(executor, calls(call("c1", "refund", {"amount": 7})), text("refunded"))
    [handle] = parked_sessions(executor, agent, 1)
    approval = ApprovalResponse(tool_call_id="c1", approved=True, approver="ana")

    with workflows_losing_a_commit(database_url) as workflows:
        CommitThenDisconnect.armed.set()
        outcome = commands.answer(executor.pool, workflows, handle.session_id, approval)
        assert not CommitThenDisconnect.armed.is_set(), "the answer's commit never lost its connection"
        assert outcome.status == "accepted"
        assert commands.answer(executor.pool, workflows, handle.session_id, approval).status == "already_answered"

    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    assert ledger.ran == [handle.session_id]
    assert rows(executor, "SELECT answered_by FROM helix.tool_call_answers WHERE session_num = helix.session_num(%(s)s)",
                s=handle.session_id) == [{"answered_by": "ana"}]
