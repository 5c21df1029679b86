"""Approval and client-tool deadlines: one absolute deadline per gated call.

The deadline is recorded, by the database's clock, when the step suspends. Every gated
call of a step waits at the same time, each against its own deadline; an answer after
the deadline is refused when it is submitted, and the run ignores one even if it was
recorded. The tests wait on the database's clock (``now() > deadline``) and assert
outcomes, never durations.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from pydantic import BaseModel

from helix_dbos import AgentHooks, ApprovalResponse, ClientToolResult, ToolContext, define_agent, define_tool
from helix_dbos.errors import ToolCallNotPendingError
from helix_dbos._store import writes
from runtime_testkit import (
    RESULT_TIMEOUT,
    assert_paired,
    call,
    calls,
    cli,
    result_for,
    rows,
    session_status,
    text,
    unique,
    use_model,
    wait_for,
)


class Refund(BaseModel):
    amount: int


class Question(BaseModel):
    question: str


class Reply(BaseModel):
    answer: str


def refund_tool(ran: list[int], name: str, **options: Any) -> Any:
    def execute(args: Refund, ctx: ToolContext) -> dict[str, Any]:
        ran.append(args.amount)
        return {"refunded": args.amount}

    return define_tool(name, "Refund.", Refund, execute, require_approval=True, **options)


def pending_row(executor: Any, session_id: str, call_id: str) -> dict[str, Any]:
    [row] = rows(
        executor,
        "SELECT status, deadline, now() > deadline AS expired FROM helix.pending_tool_calls"
        " WHERE session_num = helix.session_num(%(s)s) AND tool_call_id = %(t)s",
        s=session_id, t=call_id,
    )
    return row


def wait_past_deadline(executor: Any, session_id: str, call_id: str) -> None:
    """Until the database's clock is past the call's recorded deadline."""
    wait_for(lambda: pending_row(executor, session_id, call_id)["expired"], timeout=RESULT_TIMEOUT,
             what=f"the deadline of {call_id}")


def wait_listed(executor: Any, session_id: str, ids: list[str]) -> None:
    wait_for(lambda: sorted(p.tool_call_id for p in executor.list_pending(session_id)) == sorted(ids),
             timeout=RESULT_TIMEOUT, what=f"pending calls {ids}")


def approve(executor: Any, session_id: str, call_id: str) -> str:
    return executor.submit_tool_result(session_id, ApprovalResponse(tool_call_id=call_id, approved=True)).status


def test_each_call_has_its_own_deadline_from_the_suspension(executor: Any) -> None:
    """g1 (4 s) is answered at once; g2 (2 s) must not wait for g1: its deadline counts
    from the suspension, so an approval after it is refused and the tool never runs."""
    ran: list[int] = []
    tools = [refund_tool(ran, "refund_slow", approval_timeout=4), refund_tool(ran, "refund_fast", approval_timeout=2)]
    agent = define_agent(name=unique("deadlines"), system_prompt="x", tools=tools)
    use_model(executor, calls(call("g1", "refund_slow", {"amount": 1}), call("g2", "refund_fast", {"amount": 2})),
              text("done"))
    handle = executor.execute(agent, "go")
    sid = handle.session_id
    wait_listed(executor, sid, ["g1", "g2"])
    assert approve(executor, sid, "g1") == "accepted"

    wait_past_deadline(executor, sid, "g2")
    with pytest.raises(ToolCallNotPendingError, match="g2.*timed out"):
        approve(executor, sid, "g2")

    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    messages = executor.get_session(sid).messages
    assert_paired(messages)
    assert result_for(messages, "g1").content == '{"refunded":1}'
    assert (result_for(messages, "g2").content, result_for(messages, "g2").is_error) == (
        "Tool call g2 timed out waiting for approval", True,
    )
    assert ran == [1]
    assert pending_row(executor, sid, "g2")["status"] == "timed_out"
    assert [r["tool_call_id"] for r in rows(
        executor, "SELECT tool_call_id FROM helix.tool_call_answers WHERE session_num = helix.session_num(%(s)s)", s=sid)] == ["g1"]


def test_an_untimed_call_does_not_hold_back_a_timed_one(executor: Any) -> None:
    """g1 waits forever, g2 for 2 s: g2 times out on time while g1 still waits (it leaves
    the pending list and refuses answers); g1's approval later completes the step."""
    ran: list[int] = []
    tools = [refund_tool(ran, "refund"), refund_tool(ran, "refund_fast", approval_timeout=2)]
    agent = define_agent(name=unique("untimed"), system_prompt="x", tools=tools)
    mock = use_model(executor, calls(call("g1", "refund", {"amount": 1}), call("g2", "refund_fast", {"amount": 2})),
                     text("done"))
    handle = executor.execute(agent, "go")
    sid = handle.session_id
    wait_listed(executor, sid, ["g1", "g2"])

    wait_for(lambda: pending_row(executor, sid, "g2")["status"] == "timed_out", timeout=RESULT_TIMEOUT,
             what="g2 to time out while g1 waits")
    assert session_status(executor, sid) == "awaiting_approval"
    assert [p.tool_call_id for p in executor.list_pending(sid)] == ["g1"]
    late = cli(executor, "approve", sid, "g2", expect=1)
    assert "it timed out" in late.stderr

    assert approve(executor, sid, "g1") == "accepted"
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    messages = executor.get_session(sid).messages
    assert_paired(messages)
    assert result_for(messages, "g1").content == '{"refunded":1}'
    assert result_for(messages, "g2").content == "Tool call g2 timed out waiting for approval"
    assert result_for(messages, "g2") in mock.get_last_input().messages
    assert ran == [1]


def test_the_run_ignores_an_answer_recorded_after_the_deadline(executor: Any) -> None:
    """An answer written past the deadline by a writer that skips the submit-time check
    (an older client, a manual INSERT) reaches the run before it reads any message: the
    run compares the answer's recorded time with the deadline and times the call out,
    with the timeout path: error result, failed wait usage, hooks."""
    suspended, release = threading.Event(), threading.Event()
    seen: list[tuple[str, Any]] = []

    async def hold(reason: str, ids: list[str], ctx: Any) -> None:
        suspended.set()
        await asyncio.to_thread(release.wait, RESULT_TIMEOUT)

    def after_tool(tool_call: Any, result: Any, ctx: Any) -> None:
        seen.append(("after_tool", (tool_call.id, result.content, result.is_error)))

    def on_message(message: Any, ctx: Any) -> None:
        if getattr(message, "tool_call_id", None) == "c1":
            seen.append(("on_message", message.content))

    ask = define_tool("ask", "Ask.", Question, "client", output_schema=Reply, client_timeout=1)
    agent = define_agent(name=unique("late"), system_prompt="x", tools=[ask],
                         hooks=AgentHooks(on_agent_suspended=hold, after_tool=after_tool, on_message=on_message))
    use_model(executor, calls(call("c1", "ask", {"question": "?"})), text("done"))
    handle = executor.execute(agent, "go")
    sid = handle.session_id
    try:
        assert suspended.wait(RESULT_TIMEOUT), "the run never suspended"
        wait_past_deadline(executor, sid, "c1")
        with pytest.raises(ToolCallNotPendingError, match="timed out"):
            executor.submit_tool_result(sid, ClientToolResult(tool_call_id="c1", result={"answer": "late"}))
        message = {"kind": "client", "tool_call_id": "c1", "result": {"answer": "late"}, "error": None}
        # What the submit-time check refuses, written anyway: the audit row, before the
        # step's waiter looks (it exists only once the hook returns).
        with executor.pool.connection() as conn, conn.transaction():
            assert writes.record_answer(conn, sid, "c1", "client", message)
    finally:
        release.set()

    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    timed_out = result_for(executor.get_session(sid).messages, "c1")
    expected = "Tool call c1 timed out waiting for the client's result"
    assert (timed_out.content, timed_out.is_error) == (expected, True)
    assert pending_row(executor, sid, "c1")["status"] == "timed_out"
    [wait] = rows(executor, "SELECT success FROM helix.session_usage(%(s)s) WHERE source = 'client_tool_wait'",
                  s=sid)
    assert wait["success"] is False
    assert ("after_tool", ("c1", expected, True)) in seen and ("on_message", expected) in seen
