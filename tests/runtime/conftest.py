"""Helpers for the runtime tests: scripted models, waiting, and reading ``helix.*`` rows.

Every test uses the session-scoped ``executor`` fixture (tests/conftest.py): one DBOS
launched on a real, migrated Postgres. Tests script the model with a
:class:`MockLLMAdapter` responder keyed on the transcript (see :func:`scripted`), give
their agents unique names (:func:`unique`) and wait for every run they start, so no run
outlives its test and sees the next test's model.

Test modules import the helpers as ``from runtime_testkit import ...``: a conftest
module cannot be imported reliably by its own name (``tests/`` has two of them, both
``conftest``), so this one registers itself under that name when pytest loads it.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio.to_thread
import httpx
import pytest
import uvicorn
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from helix_dbos import (
    AgentConfig,
    MockLLMAdapter,
    Tool,
    ToolContext,
    define_agent,
    define_tool,
)
from helix_dbos._store.statements import all_rows
from helix_dbos.types import (
    AssistantMessage,
    Message,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)

sys.modules.setdefault("runtime_testkit", sys.modules[__name__])

RESULT_TIMEOUT = 20.0
"""Seconds a test waits for a run; runs here take well under a second."""


def unique(prefix: str) -> str:
    """A name no other test uses (agent names and session ids)."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


# --- scripting the model ------------------------------------------------------------------


def call(call_id: str, name: str, arguments: Any = None, **extra: Any) -> dict[str, Any]:
    """One tool call of a scripted step."""
    return {"id": call_id, "name": name, "arguments": {} if arguments is None else arguments, **extra}


def calls(*tool_calls: dict[str, Any], content: str | None = None) -> dict[str, Any]:
    """A scripted step that calls tools."""
    step: dict[str, Any] = {"type": "tool_calls", "tool_calls": list(tool_calls)}
    if content is not None:
        step["content"] = content
    return step


def text(content: str, **extra: Any) -> dict[str, Any]:
    """A scripted text answer."""
    return {"type": "text", "content": content, **extra}


def finish(call_id: str, **output: Any) -> dict[str, Any]:
    """A scripted ``__finish__`` call with ``output`` as its arguments."""
    return calls(call(call_id, "__finish__", output))


class ScriptExhausted(AssertionError):
    """The model was called more often than the test scripted."""


def scripted(*steps: Any) -> Callable[[list[Message], list[ToolSpec]], Any]:
    """A responder that answers call ``n`` of a session with ``steps[n]``.

    ``n`` is read off the transcript (how many assistant messages it holds; the
    ``max_tokens``-recovery and input messages are user messages), so the script does
    not depend on in-memory call counting. A step may be a function of the messages.
    """

    def respond(messages: list[Message], tools: list[ToolSpec]) -> Any:
        index = sum(isinstance(m, AssistantMessage) for m in messages)
        if index >= len(steps):
            raise ScriptExhausted(f"the script has {len(steps)} steps; the model was called for step {index + 1}")
        step = steps[index]
        return step(messages) if callable(step) else step

    return respond


def use_model(executor: Any, *steps: Any, **options: Any) -> MockLLMAdapter:
    """Install a fresh mock model answering ``steps`` in order (see :func:`scripted`)."""
    mock = MockLLMAdapter(scripted(*steps), **options)
    executor.llm = mock
    return mock


# --- transcripts ------------------------------------------------------------------------


def tool_results(messages: list[Message]) -> list[ToolResultMessage]:
    return [m for m in messages if isinstance(m, ToolResultMessage)]


def result_for(messages: list[Message], call_id: str) -> ToolResultMessage:
    found = [m for m in tool_results(messages) if m.tool_call_id == call_id]
    assert len(found) == 1, f"expected one result for {call_id}, found {found}"
    return found[0]


def assert_paired(messages: list[Message]) -> None:
    """Every tool call has exactly one result, right after its assistant message, in
    call order; and no result answers a call that does not exist."""
    seen_results: set[str] = set()
    for index, message in enumerate(messages):
        if isinstance(message, ToolResultMessage):
            assert message.tool_call_id not in seen_results, f"duplicate result {message.tool_call_id}"
            seen_results.add(message.tool_call_id)
        if not isinstance(message, AssistantMessage) or not message.tool_calls:
            continue
        expected = [c.id for c in message.tool_calls]
        following = messages[index + 1 : index + 1 + len(expected)]
        got = [m.tool_call_id if isinstance(m, ToolResultMessage) else None for m in following]
        assert got == expected, f"assistant message {index}: calls {expected}, then results {got}"
    called = {c.id for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls}
    assert seen_results <= called, f"results without calls: {seen_results - called}"


# --- waiting ------------------------------------------------------------------------------


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.01)


# --- holding a run inside a tool -------------------------------------------------------------

GATE_WAIT = 10.0
"""A gated tool gives up (fails) after this long, so a broken test never hangs a run."""

_gates: list[Gate] = []


class NoInput(BaseModel):
    pass


class Gate:
    """A tool that blocks its run until the test opens the gate::

        gate = Gate()
        agent = define_agent(..., tools=[gate.tool()])
        handle = executor.execute(agent, "go")
        gate.wait_entered()       # the run is now inside the tool, mid-step
        ...                       # interrupt, abort, try a second execute, read the stream
        gate.open()

    Every gate is opened when its test ends, pass or fail.
    """

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.opened = threading.Event()
        self.left = threading.Event()
        self.calls = 0
        _gates.append(self)

    def tool(self, name: str = "wait_here", **options: Any) -> Tool:
        """The gated tool; ``options`` go to :func:`define_tool` (e.g. ``finish_with=True``)."""

        def execute(_: NoInput, ctx: ToolContext) -> dict[str, Any]:
            self.calls += 1
            self.entered.set()
            try:
                if not self.opened.wait(GATE_WAIT):
                    raise TimeoutError("the test never opened the gate")
                return {"released": True}
            finally:
                self.left.set()

        return define_tool(name, "Blocks until the test releases it.", NoInput, execute, **options)

    def wait_entered(self, timeout: float = 10.0) -> None:
        assert self.entered.wait(timeout), "the run never reached the gated tool"

    def open(self) -> None:
        self.opened.set()


# --- the database -------------------------------------------------------------------------


def rows(executor: Any, sql: str, **params: Any) -> list[dict[str, Any]]:
    with executor.pool.connection() as conn:
        return all_rows(conn, sql, params)


def session_status(executor: Any, session_id: str) -> str | None:
    found = rows(executor, "SELECT status FROM helix.sessions WHERE id = %(id)s", id=session_id)
    return found[0]["status"] if found else None


def events(executor: Any, session_id: str) -> list[dict[str, Any]]:
    return rows(executor, "SELECT seq, run, step, type, data FROM helix.events WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %(id)s) ORDER BY seq", id=session_id)


USAGE_ORDER = "run, step, array_position(ARRAY['llm', 'tool', 'client_tool_wait'], source), name"
"""The usage ledger in the order a step's usage happens: the model's call, its tools, the
client tools' waits."""


def usage_rows(executor: Any, session_id: str) -> list[dict[str, Any]]:
    return rows(executor, "SELECT run, step, source, name, input_tokens, output_tokens, total_tokens, success"
                f" FROM helix.session_usage(%(id)s) ORDER BY {USAGE_ORDER}", id=session_id)


@contextmanager
def statements_run(*pools: Any, thread: threading.Thread | None = None) -> Iterator[list[str]]:
    """The statements run on connections of ``pools`` while in the block (only ``thread``'s,
    when given), in order. psycopg has no statement event: each connection a pool hands
    out in the block makes its cursors (``conn.execute``'s too) of a subclass of its
    cursor factory that notes each statement, until the connection goes back."""
    statements: list[str] = []

    def note(cursor: Any, query: Any) -> None:
        if thread is None or threading.current_thread() is thread:
            statements.append(query if isinstance(query, str) else query.as_string(cursor))  # or psycopg.sql's

    def noting(factory: type[Any]) -> type[Any]:
        class Noting(factory):  # type: ignore[valid-type, misc]
            def execute(self, query: Any, *args: Any, **kwargs: Any) -> Any:
                note(self, query)
                return super().execute(query, *args, **kwargs)

            def executemany(self, query: Any, *args: Any, **kwargs: Any) -> Any:
                note(self, query)
                return super().executemany(query, *args, **kwargs)

        return Noting

    def watched(connection: Callable[..., Any]) -> Callable[..., Any]:
        @contextmanager
        def checked_out(*args: Any, **kwargs: Any) -> Iterator[Any]:
            with connection(*args, **kwargs) as conn:
                factory = conn.cursor_factory
                conn.cursor_factory = noting(factory)
                try:
                    yield conn
                finally:
                    conn.cursor_factory = factory

        return checked_out

    with pytest.MonkeyPatch.context() as patch:
        for pool in {id(pool): pool for pool in pools}.values():  # each pool once, named twice or not
            patch.setattr(pool, "connection", watched(pool.connection))
        yield statements


@pytest.fixture(autouse=True)
def _no_run_outlives_its_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each test that uses the executor, wait until none of the sessions it touched
    is mid-run, so a late run never calls the next test's model; fail if one is stuck."""
    executor = request.getfixturevalue("executor") if "executor" in request.fixturenames else None
    started = rows(executor, "SELECT now() AS t")[0]["t"] if executor is not None else None
    yield
    while _gates:
        _gates.pop().open()
    if executor is None:
        return
    wait_for(
        lambda: not rows(
            executor, "SELECT id FROM helix.sessions WHERE status = 'active' AND updated_at >= %(t)s", t=started
        ),
        timeout=15,
        what="every run of the test to end",
    )


HELIX = Path(sys.executable).with_name("helix-dbos")


def cli(executor: Any, *args: str, expect: int = 0) -> subprocess.CompletedProcess[str]:
    """Run ``helix-dbos <args> --database-url <the test database>`` in a new process."""
    proc = subprocess.run(
        [str(HELIX), *args, "--database-url", executor.database_url], capture_output=True, text=True, timeout=90
    )
    assert proc.returncode == expect, (
        f"helix-dbos {' '.join(args)} exited {proc.returncode}, expected {expect}\n"
        f"stdout: {proc.stdout}\nstderr: {proc.stderr}"
    )
    if expect != 0:
        assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1, proc.stderr  # one line, no traceback
    return proc


# --- one scripted model for a family of agents (sub-agent tests) ----------------------------

Step = Any  # a scripted step (dict) or a function of the transcript returning one


def agent(name: str, **options: Any) -> AgentConfig:
    """An agent whose system prompt names it, so the shared model can tell agents apart."""
    return define_agent(name, system_prompt=f"You are {name}.", **options)


def family_model(executor: Any, scripts: dict[AgentConfig, list[Step]]) -> MockLLMAdapter:
    """Install one mock model for several agents.

    Each agent answers step ``n`` (the number of assistant messages in its transcript)
    with ``scripts[agent][n]``; a callable step gets the transcript. The agent is picked
    by its system prompt, and the tools offered must be exactly the agent's own, so a
    child is never answered with its parent's script.
    """
    by_prompt = {f"You are {a.name}.": a for a in scripts}

    def respond(messages: list[Message], tools: list[ToolSpec]) -> Any:
        config = by_prompt[messages[0].content.split("\n")[0]]  # type: ignore[union-attr]
        offered = sorted(t.name for t in tools)
        expected = [t.name for t in config.all_tools()]
        assert offered == sorted(expected), f"{config.name} was offered {offered}, expected {expected}"
        steps = scripts[config]
        index = sum(isinstance(m, AssistantMessage) for m in messages)
        assert index < len(steps), f"{config.name}: script has {len(steps)} steps, asked for step {index + 1}"
        step = steps[index]
        return step(messages) if callable(step) else step

    mock = MockLLMAdapter(respond)
    executor.llm = mock
    return mock


def user_input(messages: list[Message]) -> str:
    return next(m.content for m in messages if isinstance(m, UserMessage))  # type: ignore[return-value]


def last_result(messages: list[Message]) -> ToolResultMessage:
    return [m for m in messages if isinstance(m, ToolResultMessage)][-1]


def sub(session_id: str, call_id: str) -> str:
    return f"{session_id}-sub-{call_id}"


# --- the executor's log, collected -----------------------------------------------------------


class Collect(logging.Handler):
    """Keeps every record it is given."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def events(self, session_id: str) -> list[tuple[str, str, dict[str, Any]]]:
        """``(level, event, fields)`` of the records about one session, in order."""
        return [
            (r.levelname, r.event, r.fields)  # type: ignore[attr-defined]
            for r in self.records
            if getattr(r, "fields", {}).get("session_id") == session_id
        ]


@pytest.fixture
def collected(executor: Any) -> Iterator[Collect]:
    """The executor logs to a logger of the test's own, with a collecting handler."""
    handler = Collect()
    logger = logging.getLogger(unique("test.helix"))
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    logger.addHandler(handler)
    executor.logger = logger
    try:
        yield handler
    finally:
        executor.logger = None


# --- a real HTTP server (agent server and console tests) -------------------------------------


class Serving:
    """A uvicorn server on a free port, in a thread."""

    def __init__(self, app: Any) -> None:
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        wait_for(lambda: self.server.started, what="uvicorn to start")
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


THREAD_TOKENS = 40
"""The tokens of Starlette's thread pool (anyio's default limiter): threads its sync work may hold."""


class FullThreadPool:
    """Starlette's thread pool held full: ``/block``, a route added to ``app``, takes a
    thread of the pool and keeps it until :meth:`release`. A route that needs a thread
    waits meanwhile; a native async route answers::

        pool = FullThreadPool(app)
        serving = Serving(app)
        with pool.held(serving.url):
            httpx.get(serving.url + "/status?session_id=s1")   # answers only if it needs no thread
    """

    def __init__(self, app: Any) -> None:
        self._lock = threading.Lock()
        self._holding = 0
        self.full = threading.Event()
        self._released = threading.Event()
        app.router.routes.append(Route("/block", self._block))

    async def _block(self, request: Any) -> PlainTextResponse:
        limiter = anyio.to_thread.current_default_thread_limiter()
        await run_in_threadpool(self._hold, limiter)
        return PlainTextResponse("released")

    def _hold(self, limiter: Any) -> None:
        with self._lock:
            self._holding += 1
            if self._holding == THREAD_TOKENS and limiter.borrowed_tokens == limiter.total_tokens:
                self.full.set()
        self._released.wait(GATE_WAIT * 3)

    @contextmanager
    def held(self, url: str, headers: dict[str, str] | None = None) -> Iterator[None]:
        """Every thread of the pool held by a request to ``/block`` (with ``headers``) while the block runs."""
        with ThreadPoolExecutor(max_workers=THREAD_TOKENS) as clients:
            blocked = [clients.submit(httpx.get, f"{url}/block", headers=headers, timeout=GATE_WAIT * 4)
                       for _ in range(THREAD_TOKENS)]
            try:
                assert self.full.wait(GATE_WAIT), f"{self._holding} of {THREAD_TOKENS} threads held"
                yield
            finally:
                self._released.set()
        assert all(b.result().text == "released" for b in blocked)
