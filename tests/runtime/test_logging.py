"""Logging: silent by default (no stderr, no DBOS traceback from a normal
abort), an injectable logger (a standard ``logging.Logger`` or a structlog-style one), and
the structured events ``client_tool.suspended`` / ``.submitted`` / ``.timeout`` /
``.validation_failed`` and ``subagent.dispatch_failed``."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from helix_dbos import (
    AgentHooks,
    ClientToolResult,
    ConfigurationError,
    DBOSAgentExecutor,
    InvalidToolResultError,
    MockLLMAdapter,
    create_sub_agent_tool,
    define_agent,
    define_tool,
)
from runtime_testkit import (
    Collect,
    RESULT_TIMEOUT,
    agent,
    call,
    calls,
    family_model,
    text,
    unique,
    use_model,
    wait_for,
)

APPS = Path(__file__).resolve().parent.parent / "apps"


class KeywordLogger:
    """A structlog-style logger: ``info(event, **fields)``."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []

    def _record(self, level: str, event: str, fields: dict[str, Any]) -> None:
        self.calls.append((level, event, fields))

    def debug(self, event: str, **fields: Any) -> None:
        self._record("debug", event, fields)

    def info(self, event: str, **fields: Any) -> None:
        self._record("info", event, fields)

    def warning(self, event: str, **fields: Any) -> None:
        self._record("warning", event, fields)

    def error(self, event: str, **fields: Any) -> None:
        self._record("error", event, fields)




class Question(BaseModel):
    question: str


class Answer(BaseModel):
    answer: str


def test_nothing_reaches_stderr_by_default_not_even_from_aborts(executor: Any) -> None:
    """A new process with logging left as it comes: abort a run in a tool, resume it, abort
    a parent whose sub-agent is in a tool. DBOS's cancel warnings and the traceback of
    DBOSAwaitedWorkflowCancelledError used to reach stderr."""
    proc = subprocess.run(
        [sys.executable, str(APPS / "abort_app.py"), executor.database_url, unique("quiet")],
        capture_output=True, text=True, timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"aborted": "aborted", "resumed": "completed", "parent_aborted": "aborted"}
    assert proc.stderr == ""


def test_the_library_logger_is_silent_until_the_app_configures_logging() -> None:
    probe = "import logging, helix_dbos; logging.getLogger('helix_dbos').error('should not be printed')"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert proc.stderr == ""
    assert any(isinstance(h, logging.NullHandler) for h in logging.getLogger("helix_dbos").handlers)


def test_client_tool_events_reach_an_injected_logger(executor: Any, collected: Collect) -> None:
    ask = define_tool("ask_user", "Ask the user.", Question, "client", output_schema=Answer)
    late = define_tool("ask_late", "Ask, briefly.", Question, "client", output_schema=Answer, client_timeout=1)
    a = define_agent(unique("log-client"), system_prompt="x", tools=[ask, late])
    use_model(executor, calls(call("c1", "ask_user", {"question": "colour?"}), call("c2", "ask_late", {"question": "?"})),
              text("done"))
    handle = executor.execute(a, "go")
    sid = handle.session_id
    wait_for(lambda: len(executor.list_pending(sid)) == 2, timeout=RESULT_TIMEOUT, what="two pending calls")
    # the run logs its suspension right after the transaction that makes the calls pending
    wait_for(lambda: [e for _, e, _ in collected.events(sid)].count("client_tool.suspended") == 2,
             timeout=RESULT_TIMEOUT, what="the suspension logged")

    with pytest.raises(InvalidToolResultError):
        executor.submit_tool_result(sid, ClientToolResult(tool_call_id="c1", result={"colour": "blue"}))
    executor.submit_tool_result(sid, ClientToolResult(tool_call_id="c1", result={"answer": "blue"}))
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"  # c2 timed out after 1 s

    got = collected.events(sid)
    names = [(level, event, fields.get("tool_call_id")) for level, event, fields in got]
    assert names == [
        ("INFO", "client_tool.suspended", "c1"),
        ("INFO", "client_tool.suspended", "c2"),
        ("WARNING", "client_tool.validation_failed", "c1"),
        ("INFO", "client_tool.submitted", "c1"),
        ("WARNING", "client_tool.timeout", "c2"),
    ]
    suspended, _, failed, submitted, timeout = (fields for _, _, fields in got)
    assert suspended == {"session_id": sid, "run": 1, "step": 1, "tool_call_id": "c1", "tool_name": "ask_user",
                         "kind": "client", "timeout": None}
    assert failed["tool_name"] == "ask_user" and "answer" in failed["error"]
    assert submitted["kind"] == "client" and submitted["wait_ms"] >= 0
    assert timeout == {"session_id": sid, "run": 1, "step": 1, "tool_call_id": "c2", "tool_name": "ask_late",
                       "kind": "client"}
    record = next(r for r in collected.records if getattr(r, "event", None) == "client_tool.submitted")
    assert record.name == executor.logger.name
    assert record.getMessage().startswith(f"client_tool.submitted session_id={sid} tool_call_id=c1")
    assert record.tool_name == "ask_user"  # type: ignore[attr-defined]  # each field is an attribute too


def test_a_structlog_style_logger_gets_the_event_name_and_keyword_fields(executor: Any) -> None:
    child = agent(unique("helper"))
    parent = agent(unique("dispatcher"), tools=[create_sub_agent_tool(child)])
    family_model(executor, {parent: [calls(call("ghost1", "subagent__no-such-agent", {"input": "?"})), text("ok")],
                            child: []})
    logger = KeywordLogger()
    executor.logger = logger
    try:
        handle = executor.execute(parent, "dispatch")
        assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    finally:
        executor.logger = None
    mine = [c for c in logger.calls if c[2].get("session_id") == handle.session_id]
    assert len(mine) == 1
    level, event, fields = mine[0]
    assert (level, event) == ("error", "subagent.dispatch_failed")
    assert fields["tool_call_id"] == "ghost1" and fields["agent_type"] == "no-such-agent"
    assert "Unknown sub-agent" in fields["error"]


def test_a_hook_that_raises_is_an_event_with_its_traceback(executor: Any, collected: Collect) -> None:
    def broken(*args: Any) -> None:
        raise RuntimeError("hook is broken")

    a = define_agent(unique("log-hook"), system_prompt="x", hooks=AgentHooks(on_step_finish=broken))
    use_model(executor, text("fine"))
    result = executor.execute(a, "go").result(timeout=RESULT_TIMEOUT)
    assert result.status == "completed"
    record = next(r for r in collected.records if getattr(r, "event", None) == "hook.failed")
    assert record.levelno == logging.ERROR and record.fields == {"hook": "on_step_finish"}  # type: ignore[attr-defined]
    assert record.exc_info is not None and "hook is broken" in str(record.exc_info[1])


def test_something_that_is_not_a_logger_is_refused(executor: Any, database_url: str) -> None:
    with pytest.raises(ConfigurationError, match="logger must be"):
        DBOSAgentExecutor(llm=MockLLMAdapter(), database_url=database_url, logger=print)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="logger must be"):
        executor.logger = "helix"
    assert executor.logger is logging.getLogger("helix_dbos")  # unchanged
