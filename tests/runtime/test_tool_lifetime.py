"""A tool call's lifetime: a timeout, an interrupt and an abort each end a tool that never
returns, through ``ctx.abort_signal``; and an abort never makes a resume repeat a tool
that had finished (its outcome is recorded when it returns, _store/sql/006)."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from helix_dbos import AbortSignal, AgentDefinitionError, ToolContext, define_agent, define_tool
from helix_dbos import admin
from runtime_testkit import (
    RESULT_TIMEOUT,
    assert_paired,
    call,
    calls,
    result_for,
    rows,
    text,
    unique,
    use_model,
    wait_for,
)


class NoInput(BaseModel):
    pass


class Hung:
    """Sync tools that never return by themselves: one ignores its abort signal, one
    returns as soon as it is set. Released when the test ends, so no thread outlives it."""

    def __init__(self) -> None:
        self.released = threading.Event()
        self.contexts: dict[str, ToolContext] = {}
        self.calls = 0

    def ignoring(self, name: str = "hang", **options: Any):
        def execute(_: NoInput, ctx: ToolContext) -> dict[str, Any]:
            self.calls += 1
            self.contexts[ctx.tool_call_id] = ctx
            self.released.wait()
            return {"released": True}

        return define_tool(name, "Never returns.", NoInput, execute, **options)

    def watching(self, name: str = "watch", **options: Any):
        def execute(_: NoInput, ctx: ToolContext) -> dict[str, Any]:
            self.contexts[ctx.tool_call_id] = ctx
            ctx.abort_signal.wait()
            return {"stopped_by": ctx.abort_signal.reason}

        return define_tool(name, "Returns when told to stop.", NoInput, execute, **options)

    def entered(self, *call_ids: str) -> None:
        wait_for(lambda: all(c in self.contexts for c in call_ids), timeout=RESULT_TIMEOUT, what=f"calls {call_ids}")

    def reason(self, call_id: str) -> str | None:
        return self.contexts[call_id].abort_signal.reason


@pytest.fixture
def hung():
    tools = Hung()
    yield tools
    tools.released.set()


# --- definitions ----------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, -1, float("inf"), True, "2"])
def test_timeouts_must_be_positive_numbers_of_seconds(bad: Any) -> None:
    with pytest.raises(AgentDefinitionError, match="timeouts must be positive numbers of seconds"):
        define_tool("t", "T.", NoInput, lambda i, c: None, timeout=bad)
    with pytest.raises(AgentDefinitionError, match="tool_timeout must be a positive number of seconds"):
        define_agent(unique("bad-timeout"), tool_timeout=bad)


def test_a_client_tool_takes_client_timeout_not_timeout() -> None:
    with pytest.raises(AgentDefinitionError, match="client_timeout"):
        define_tool("t", "T.", NoInput, "client", timeout=5)


def test_the_tool_timeout_wins_over_the_agent_default() -> None:
    own = define_tool("own", "T.", NoInput, lambda i, c: None, timeout=7)
    default = define_tool("default", "T.", NoInput, lambda i, c: None)
    config = define_agent(unique("timeouts"), tools=[own, default], tool_timeout=2)
    assert (config.timeout_of(own), config.timeout_of(default)) == (7, 2)
    assert define_agent(unique("no-timeouts"), tools=[default]).timeout_of(default) is None


def test_the_abort_signal_keeps_its_first_reason_and_wakes_sync_and_async_waiters() -> None:
    signal = AbortSignal()
    assert (signal.is_set(), signal.reason, signal.wait(0.01)) == (False, None, False)

    async def waits() -> bool:
        return await signal.wait_async(timeout=10)

    threading.Timer(0.05, signal.set, args=("interrupt",)).start()
    assert asyncio.run(waits()) is True
    assert signal.set("abort") is False
    assert (signal.is_set(), signal.reason, signal.wait()) == (True, "interrupt", True)


# --- timeout ------------------------------------------------------------------------------


def test_a_sync_tool_that_never_returns_times_out_and_the_model_sees_an_error(executor, hung):
    agent = define_agent(unique("timeout-sync"), tools=[hung.ignoring(timeout=0.5)])
    mock = use_model(executor, calls(call("h1", "hang")), text("gave up on it"))
    result = executor.execute(agent, "go").result(timeout=RESULT_TIMEOUT)
    assert (result.status, result.output) == ("completed", "gave up on it")
    seen = result_for(mock.get_last_input().messages, "h1")
    assert (seen.is_error, seen.content) == (True, "Tool 'hang' timed out after 0.5s")
    assert hung.reason("h1") == "timeout"


def test_an_async_tool_past_the_agent_default_is_cancelled_and_a_tool_with_its_own_timeout_is_not(executor):
    cancelled = threading.Event()

    async def stall(_: NoInput, ctx: ToolContext) -> dict[str, Any]:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return {}

    async def slow(_: NoInput, ctx: ToolContext) -> dict[str, Any]:
        await asyncio.sleep(0.6)
        return {"slow": "but done", "told": ctx.abort_signal.is_set()}

    tools = [define_tool("stall", "Stalls.", NoInput, stall), define_tool("slow", "Slow.", NoInput, slow, timeout=30)]
    agent = define_agent(unique("timeout-async"), tools=tools, tool_timeout=0.3)
    mock = use_model(executor, calls(call("a1", "stall"), call("a2", "slow")), text("ok"))
    assert executor.execute(agent, "go").result(timeout=RESULT_TIMEOUT).status == "completed"
    messages = mock.get_last_input().messages
    assert result_for(messages, "a1").content == "Tool 'stall' timed out after 0.3s"
    assert (result_for(messages, "a2").is_error, result_for(messages, "a2").content) == (
        False, '{"slow":"but done","told":false}'
    )
    assert cancelled.wait(5)


# --- interrupt and abort --------------------------------------------------------------------


def test_an_interrupt_stops_tools_that_never_return_and_the_run_ends_interrupted(executor, hung):
    agent = define_agent(unique("interrupt-hung"), tools=[hung.ignoring(), hung.watching()])
    use_model(executor, calls(call("i1", "hang"), call("i2", "watch")), text("resumed"))
    handle = executor.execute(agent, "go")
    hung.entered("i1", "i2")
    assert executor.interrupt(handle.session_id) is True

    result = handle.result(timeout=RESULT_TIMEOUT)
    assert (result.status, result.step_count) == ("interrupted", 1)
    assert (hung.reason("i1"), hung.reason("i2")) == ("interrupt", "interrupt")
    messages = executor.get_session(handle.session_id).messages
    assert_paired(messages)
    assert result_for(messages, "i1").content == "Tool 'hang' did not return: its run was interrupted"
    assert (result_for(messages, "i2").is_error, result_for(messages, "i2").content) == (
        False, '{"stopped_by":"interrupt"}'
    )
    resumed = executor.resume(agent, handle.session_id).result(timeout=RESULT_TIMEOUT)
    assert (resumed.status, resumed.output) == ("completed", "resumed")


def test_an_abort_tells_a_tool_that_never_returns_and_a_resume_of_the_workflow_completes(executor, hung):
    agent = define_agent(unique("abort-hung"), tools=[hung.ignoring()])
    use_model(executor, calls(call("h1", "hang")), text("after the abort"))
    handle = executor.execute(agent, "go")
    hung.entered("h1")
    assert executor.abort(handle.session_id, reason="stop it") is True
    assert handle.result(timeout=RESULT_TIMEOUT).status == "aborted"
    wait_for(lambda: hung.reason("h1") == "abort", timeout=RESULT_TIMEOUT, what="the abort signal")

    # The first body still hangs on its thread; the resumed run joins it, and ends when it does.
    resumed = admin.resume(executor.database_url, handle.session_id)
    assert (resumed.run, resumed.status) == (1, "active")
    time.sleep(0.5)
    hung.released.set()
    result = handle.result(timeout=RESULT_TIMEOUT)
    assert (result.status, result.output) == ("completed", "after the abort")
    messages = executor.get_session(handle.session_id).messages
    assert_paired(messages)
    assert result_for(messages, "h1").content == '{"released":true}'
    assert hung.calls == 1


# --- abort, then resume: no repeated effect ---------------------------------------------------


@pytest.mark.parametrize(("resume", "seconds"), [("cli", 2.5), ("executor", 2.5), ("executor", 0.4)])
def test_a_tool_that_finishes_after_an_abort_is_not_run_again_by_a_resume(
    executor, tmp_path: Path, resume: str, seconds: float
):
    """2.5 s: the body ends after its step stopped waiting (it records its outcome itself);
    0.4 s: it ends within the stop grace, the step returns its outcome, and DBOS refuses the
    checkpoint of the cancelled run (workflow code records the outcome it held)."""
    ledger = tmp_path / "ledger.txt"
    entered = threading.Event()

    def pay(_: NoInput, ctx: ToolContext) -> dict[str, Any]:
        entered.set()
        time.sleep(seconds)  # the abort lands here; the effect happens anyway
        with ledger.open("a") as f:
            f.write(f"{ctx.tool_call_id}\n")
        return {"paid": len(ledger.read_text().splitlines())}

    agent = define_agent(unique(f"abort-ledger-{resume}-{int(seconds * 10)}"), tools=[define_tool("pay", "Pays.", NoInput, pay)])
    asked = itertools.count(1)  # like a real model, a new call id each time it is asked
    use_model(executor, lambda _: calls(call(f"p{next(asked)}", "pay")), text("paid once"))
    handle = executor.execute(agent, "go")
    assert entered.wait(RESULT_TIMEOUT)
    assert executor.abort(handle.session_id) is True
    assert handle.result(timeout=RESULT_TIMEOUT).status == "aborted"

    def recorded() -> list[dict[str, Any]]:
        return rows(executor, "SELECT tool_call_id, outcome->'result' AS result FROM helix.tool_outcomes"
                    " WHERE session_num = helix.session_num(%(s)s)", s=handle.session_id)

    wait_for(lambda: recorded() != [], timeout=RESULT_TIMEOUT, what="the tool to finish after the abort")
    assert recorded() == [{"tool_call_id": "p1", "result": {"paid": 1}}]

    if resume == "cli":  # helix-dbos resume
        admin.resume(executor.database_url, handle.session_id)
        resumed = handle
    else:  # an aborted run continues in place: the model is not asked for its calls again
        resumed = executor.resume(agent, handle.session_id)
    assert resumed.run == 1
    result = resumed.result(timeout=RESULT_TIMEOUT)
    assert (result.status, result.output) == ("completed", "paid once")
    assert ledger.read_text().splitlines() == ["p1"]
    messages = executor.get_session(handle.session_id).messages
    assert_paired(messages)
    assert result_for(messages, "p1").content == '{"paid":1}'
    # The committed step's checkpoints hold the outcome now: its record is gone.
    assert rows(executor, "SELECT 1 FROM helix.tool_outcomes WHERE session_num = helix.session_num(%(s)s)", s=handle.session_id) == []
