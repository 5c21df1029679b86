"""Operators see tool failures: a tool that raises is logged (``tool.failed``, with the
exception's class and traceback, the session, run, step and call), its result and its
``tool_result`` event name the exception's class, and every failed call (raised, timed
out, unknown tool, invalid arguments) counts with ``outcome="error"`` in
``helix_tool_call_duration_seconds``, read from this process's Prometheus registry (the
runs run here)."""

from __future__ import annotations

import logging
import time
from typing import Any

import prometheus_client

from helix_dbos import define_agent, tool
from helix_dbos.observability import register_fleet_metrics
from helix_dbos.observability.points import UNKNOWN_TOOL
from runtime_testkit import RESULT_TIMEOUT, Collect, call, calls, events, result_for, text, unique, use_model




def calls_counted(tool_name: str, outcome: str) -> float:
    """``helix_tool_call_duration_seconds_count{tool, outcome}`` in this process."""
    value = prometheus_client.REGISTRY.get_sample_value(
        "helix_tool_call_duration_seconds_count", {"tool": tool_name, "outcome": outcome}
    )
    return value or 0.0


def test_a_tool_that_raises_is_logged_with_its_traceback_and_its_result_names_the_exception(
    executor: Any, collected: Collect
) -> None:
    @tool
    def lookup_user(name: str) -> dict:
        """Looks a user up."""
        return {"name": name, "id": {}["user_id"]}

    @tool
    def greet(name: str) -> dict:
        """Greets."""
        return {"hello": name}

    agent = define_agent(unique("tool-raises"), tools=[lookup_user, greet])
    use_model(executor, calls(call("c1", "lookup_user", {"name": "ada"}), call("c2", "greet", {"name": "ada"})),
              text("sorry"))
    handle = executor.execute(agent, "who is ada?")
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    sid = handle.session_id

    failed = result_for(executor.get_session(sid).messages, "c1")
    assert (failed.is_error, failed.content) == (True, "KeyError: 'user_id'")
    results = {e["data"]["tool_call_id"]: e["data"] for e in events(executor, sid) if e["type"] == "tool_result"}
    assert results["c1"]["error_type"] == "KeyError" and results["c1"]["content"] == "KeyError: 'user_id'"
    assert "error_type" not in results["c2"]  # a call that did not raise

    [record] = [r for r in collected.records if getattr(r, "event", None) == "tool.failed"]
    assert record.levelno == logging.ERROR
    assert record.fields == {  # type: ignore[attr-defined]
        "session_id": sid, "run": 1, "step": 1, "tool_call_id": "c1", "tool": "lookup_user",
        "error_type": "KeyError", "error": "KeyError: 'user_id'",
    }
    assert record.getMessage() == (
        f"tool.failed session_id={sid} run=1 step=1 tool_call_id=c1 tool=lookup_user error_type=KeyError"
        """ error="KeyError: 'user_id'\""""
    )
    assert record.exc_info is not None and isinstance(record.exc_info[1], KeyError)
    assert 'return {"name": name, "id": {}["user_id"]}' in logging.Formatter().formatException(record.exc_info)


def test_every_failed_tool_call_is_counted_as_an_error(executor: Any) -> None:
    register_fleet_metrics(executor.database_url)  # this process reports to Prometheus, as a served app does
    name = unique("counted").replace("-", "_")

    def raises(x: int) -> dict:
        raise RuntimeError("broken")

    def sleeps(x: int) -> dict:
        time.sleep(2)
        return {}

    def adds(a: int, b: int) -> dict:
        return {"sum": a + b}

    raising = tool(name=f"{name}_raises", description="Raises.")(raises)
    slow = tool(name=f"{name}_sleeps", description="Sleeps.", timeout=0.2)(sleeps)
    adding = tool(name=f"{name}_adds", description="Adds.")(adds)
    agent = define_agent(unique("tool-counted"), tools=[raising, slow, adding])
    counted = [raising.name, slow.name, adding.name, UNKNOWN_TOOL]
    before = {t: calls_counted(t, "error") for t in counted}
    use_model(executor, calls(
        call("c1", raising.name, {"x": 1}),
        call("c2", slow.name, {"x": 1}),
        call("c3", adding.name, {"a": "not a number"}),
        call("c4", "no_such_tool", {}),
    ), text("done"))
    handle = executor.execute(agent, "go")
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"

    after = {t: calls_counted(t, "error") for t in counted}
    assert {t: after[t] - before[t] for t in counted} == {t: 1.0 for t in counted}
    assert calls_counted("no_such_tool", "error") == 0.0  # a made-up name is no label value
