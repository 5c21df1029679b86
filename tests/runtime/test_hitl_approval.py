"""Approval-gated tools, answered from ANOTHER process with the CLI.

The run waits in this process's DBOS; every answer comes from a ``helix-dbos``
subprocess that knows nothing but the database URL (no agent, no DBOS launched), so
these tests show what an operator's terminal does.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

from dbos import DBOS
from pydantic import BaseModel

from helix_dbos import AgentHooks, ToolContext, define_agent, define_tool
from runtime_testkit import (
    cli,
    RESULT_TIMEOUT,
    assert_paired,
    call,
    calls,
    events,
    result_for,
    rows,
    session_status,
    text,
    unique,
    usage_rows,
    use_model,
    wait_for,
)

class Refund(BaseModel):
    order_id: str
    amount: int


class Ledger:
    """A refund tool that records each time it really runs."""

    def __init__(self) -> None:
        self.ran: list[int] = []

    def tool(self, name: str = "refund", **options: Any) -> Any:
        def execute(args: Refund, ctx: ToolContext) -> dict[str, Any]:
            self.ran.append(args.amount)
            return {"refunded": args.amount}

        options.setdefault("require_approval", True)
        return define_tool(name, "Refund an order.", Refund, execute, **options)


class Suspensions:
    """on_agent_suspended / on_agent_resumed, recorded."""

    def __init__(self) -> None:
        self.log: list[tuple[Any, ...]] = []

    def hooks(self) -> AgentHooks:
        def suspended(reason: str, ids: list[str], ctx: Any) -> None:
            self.log.append(("suspended", reason, tuple(ids)))

        async def resumed(reason: str, ctx: Any) -> None:
            self.log.append(("resumed", reason))

        return AgentHooks(on_agent_suspended=suspended, on_agent_resumed=resumed)


def refund(call_id: str, amount: int, name: str = "refund") -> dict[str, Any]:
    return call(call_id, name, {"order_id": f"A-{amount}", "amount": amount})


def wait_pending(executor: Any, session_id: str, ids: list[str]) -> None:
    wait_for(
        lambda: sorted(p.tool_call_id for p in executor.list_pending(session_id)) == sorted(ids),
        timeout=RESULT_TIMEOUT,
        what=f"pending calls {ids}",
    )


def answers(executor: Any, session_id: str) -> list[dict[str, Any]]:
    return rows(
        executor,
        "SELECT tool_call_id, kind, approved, reason, answered_by, answer, answered_at"
        " FROM helix.tool_call_answers WHERE session_num = helix.session_num(%(id)s) ORDER BY tool_call_id",
        id=session_id,
    )


def pending_status(executor: Any, session_id: str, call_id: str) -> str:
    found = rows(
        executor, "SELECT status FROM helix.pending_tool_calls WHERE session_num = helix.session_num(%(s)s) AND tool_call_id = %(t)s",
        s=session_id, t=call_id,
    )
    return found[0]["status"]


# --- approve and deny -------------------------------------------------------------------------


def test_approve_runs_the_tool_and_records_who_and_why(executor: Any) -> None:
    ledger, seen = Ledger(), Suspensions()
    agent = define_agent(name=unique("approve"), system_prompt="x", tools=[ledger.tool()], hooks=seen.hooks())
    use_model(executor, calls(refund("g1", 20)), text("done"))
    handle = executor.execute(agent, "refund A-20")
    wait_pending(executor, handle.session_id, ["g1"])

    # While it waits: the status says why, the call is listed, nothing ran, the hook fired.
    shown = json.loads(cli(executor, "show", handle.session_id, "--json").stdout)
    assert shown["session"]["status"] == "awaiting_approval"
    assert [p["tool_call_id"] for p in shown["pending"]] == ["g1"]
    listed = json.loads(cli(executor, "pending", "--session", handle.session_id, "--json").stdout)
    assert [(p["tool_call_id"], p["kind"], p["tool_name"], p["input"]) for p in listed] == [
        ("g1", "approval", "refund", {"order_id": "A-20", "amount": 20})
    ]
    assert ledger.ran == []
    assert seen.log == [("suspended", "awaiting_approval", ("g1",))]
    assert "tool_approval_request" in [e["type"] for e in events(executor, handle.session_id)]

    before = rows(executor, "SELECT now() AS t")[0]["t"]
    out = cli(executor, "approve", handle.session_id, "g1", "--as", "ana", "--reason", "customer is right")
    assert out.stdout == f"approved g1 of session {handle.session_id}\n"

    result = handle.result(timeout=RESULT_TIMEOUT)
    assert result.status == "completed", result
    assert ledger.ran == [20]
    messages = executor.get_session(handle.session_id).messages
    assert_paired(messages)
    assert result_for(messages, "g1").content == '{"refunded":20}'
    assert not result_for(messages, "g1").is_error
    assert seen.log == [("suspended", "awaiting_approval", ("g1",)), ("resumed", "awaiting_approval")]
    [audit] = answers(executor, handle.session_id)
    assert (audit["kind"], audit["approved"], audit["answered_by"], audit["reason"]) == (
        "approval", True, "ana", "customer is right",
    )
    assert before <= audit["answered_at"] <= rows(executor, "SELECT now() AS t")[0]["t"]
    assert pending_status(executor, handle.session_id, "g1") == "answered"
    assert cli(executor, "pending", "--session", handle.session_id).stdout == "no pending tool calls\n"


def test_deny_never_runs_the_tool_and_the_model_reads_the_reason(executor: Any) -> None:
    ledger = Ledger()
    agent = define_agent(name=unique("deny"), system_prompt="x", tools=[ledger.tool()])
    mock = use_model(executor, calls(refund("g1", 900)), text("ok, no refund"))
    handle = executor.execute(agent, "refund A-900")
    wait_pending(executor, handle.session_id, ["g1"])

    out = json.loads(cli(executor, "deny", handle.session_id, "g1", "--reason", "over the limit", "--json").stdout)
    assert out == {"session_id": handle.session_id, "tool_call_id": "g1", "status": "accepted"}

    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    assert ledger.ran == []
    denied = result_for(executor.get_session(handle.session_id).messages, "g1")
    assert denied.is_error
    assert denied.content == "Tool call g1 was not approved by the user: over the limit"
    assert denied in mock.get_last_input().messages  # the model was told
    assert [u for u in usage_rows(executor, handle.session_id) if u["source"] == "tool"] == []
    [audit] = answers(executor, handle.session_id)
    assert (audit["approved"], audit["reason"], audit["answered_by"]) == (False, "over the limit", None)


def test_an_unanswered_call_times_out_into_an_error_result(executor: Any) -> None:
    ledger = Ledger()
    agent = define_agent(name=unique("timeout"), system_prompt="x", tools=[ledger.tool(approval_timeout=1)])
    use_model(executor, calls(refund("g1", 5)), text("gave up"))
    handle = executor.execute(agent, "refund A-5")
    wait_pending(executor, handle.session_id, ["g1"])

    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    timed_out = result_for(executor.get_session(handle.session_id).messages, "g1")
    assert timed_out.is_error
    assert timed_out.content == "Tool call g1 timed out waiting for approval"
    assert ledger.ran == []
    assert pending_status(executor, handle.session_id, "g1") == "timed_out"

    late = cli(executor, "approve", handle.session_id, "g1", expect=1)
    assert "no longer waiting for an answer: it timed out" in late.stderr
    assert answers(executor, handle.session_id) == []


def test_an_approval_sent_before_the_run_waits_for_it_is_received(executor: Any) -> None:
    """Force the order: the pending row is committed, then the suspension hook holds the
    run BEFORE its waiter exists; the approval is given in that window. It is recorded
    (there is no workflow to send it to yet) and the waiter's first look finds it."""
    ledger = Ledger()
    suspended, release = threading.Event(), threading.Event()

    async def hold(reason: str, ids: list[str], ctx: Any) -> None:
        suspended.set()
        await asyncio.to_thread(release.wait, RESULT_TIMEOUT)

    agent = define_agent(
        name=unique("early"), system_prompt="x", tools=[ledger.tool()], hooks=AgentHooks(on_agent_suspended=hold)
    )
    use_model(executor, calls(refund("g1", 7)), text("done"))
    handle = executor.execute(agent, "refund A-7")
    waiter = f"{handle.workflow_id}:wait:1"
    try:
        assert suspended.wait(RESULT_TIMEOUT), "the run never suspended"
        assert [p.tool_call_id for p in executor.list_pending(handle.session_id)] == ["g1"]

        cli(executor, "approve", handle.session_id, "g1")

        assert DBOS.get_workflow_status(waiter) is None
        assert notifications(executor, waiter) == []
        assert [a["tool_call_id"] for a in answers(executor, handle.session_id)] == ["g1"]
        assert session_status(executor, handle.session_id) == "awaiting_approval"
        assert ledger.ran == []
    finally:
        release.set()
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    assert ledger.ran == [7]
    steps = [s["function_name"] for s in DBOS.list_workflow_steps(waiter)]
    assert steps == ["helix_collect_answers", "helix_agent_run"]  # found at once: no recv


def notifications(executor: Any, workflow_id: str) -> list[dict[str, Any]]:
    return rows(
        executor, "SELECT topic, consumed FROM dbos.notifications WHERE destination_uuid = %(wf)s", wf=workflow_id
    )


# --- answers that change nothing -----------------------------------------------------------------


class Question(BaseModel):
    question: str


class Answer(BaseModel):
    answer: str


def test_duplicate_unknown_wrong_kind_and_late_answers_exit_1_and_change_nothing(executor: Any) -> None:
    ledger = Ledger()
    ask = define_tool("ask_user", "Ask the user.", Question, "client", output_schema=Answer)
    agent = define_agent(name=unique("refuse"), system_prompt="x", tools=[ledger.tool(), ask])
    use_model(executor, calls(refund("g1", 3), call("c1", "ask_user", {"question": "sure?"})), text("done"))
    handle = executor.execute(agent, "go")
    sid = handle.session_id
    wait_pending(executor, sid, ["g1", "c1"])

    assert "no tool call 'nope'" in cli(executor, "approve", sid, "nope", expect=1).stderr
    assert "no session 'no-such-session'" in cli(executor, "approve", "no-such-session", "g1", expect=1).stderr
    assert "waits for a client result" in cli(executor, "approve", sid, "c1", expect=1).stderr
    assert "waits for an approval" in cli(executor, "submit", sid, "g1", "--result", "{}", expect=1).stderr
    assert answers(executor, sid) == []

    cli(executor, "approve", sid, "g1", "--as", "ana")
    again = cli(executor, "deny", sid, "g1", "--reason", "changed my mind", "--as", "bob", expect=1)
    assert "was already answered" in again.stderr
    [audit] = answers(executor, sid)
    assert (audit["approved"], audit["answered_by"], audit["reason"]) == (True, "ana", None)

    cli(executor, "submit", sid, "c1", "--result", '{"answer": "yes"}')
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    assert ledger.ran == [3]
    messages = executor.get_session(sid).messages
    assert_paired(messages)
    assert result_for(messages, "g1").content == '{"refunded":3}'
    assert result_for(messages, "c1").content == '{"answer":"yes"}'

    # Not pending any more: the step committed, so both calls are answered and closed.
    assert pending_status(executor, sid, "g1") == "answered"
    assert "was already answered" in cli(executor, "approve", sid, "g1", expect=1).stderr
    assert "was already answered" in cli(executor, "submit", sid, "c1", "--error", "late", expect=1).stderr
    assert [a["tool_call_id"] for a in answers(executor, sid)] == ["c1", "g1"]
    assert executor.get_session(sid).messages == messages


# --- the gate itself -------------------------------------------------------------------------------


def test_a_require_approval_function_that_raises_requires_approval(executor: Any) -> None:
    ledger = Ledger()

    def needs_approval(args: Refund, ctx: ToolContext) -> bool:
        if args.amount < 0:
            raise ValueError("cannot judge a negative amount")
        return args.amount > 100

    agent = define_agent(name=unique("failclosed"), system_prompt="x", tools=[ledger.tool(require_approval=needs_approval)])
    use_model(executor, calls(refund("small", 10), refund("odd", -1), refund("big", 500)), text("done"))
    handle = executor.execute(agent, "go")
    wait_pending(executor, handle.session_id, ["odd", "big"])
    # The call that needs no approval ran while the others wait.
    wait_for(lambda: ledger.ran == [10], what="the ungated call to run")

    cli(executor, "approve", handle.session_id, "odd")
    cli(executor, "approve", handle.session_id, "big")
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    assert sorted(ledger.ran) == [-1, 10, 500]
    messages = executor.get_session(handle.session_id).messages
    assert_paired(messages)
    assert [a["tool_call_id"] for a in answers(executor, handle.session_id)] == ["big", "odd"]


def test_two_gated_calls_answered_in_reverse_order_commit_in_call_order_in_one_step(executor: Any) -> None:
    """The second call's approval arrives while the first still waits; nothing is
    committed until both are answered."""
    ledger = Ledger()
    agent = define_agent(name=unique("reverse"), system_prompt="x", tools=[ledger.tool()])
    use_model(executor, calls(refund("g1", 1), refund("g2", 2)), text("done"))
    handle = executor.execute(agent, "go")
    sid = handle.session_id
    wait_pending(executor, sid, ["g1", "g2"])

    cli(executor, "approve", sid, "g2")
    listed = json.loads(cli(executor, "pending", "--session", sid, "--json").stdout)
    assert [p["tool_call_id"] for p in listed] == ["g1", "g2"]  # answered, but the step is not committed
    step_rows = (
        "SELECT seq, step, message->>'role' AS role, message->>'tool_call_id' AS call"
        " FROM helix.messages WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %(id)s) ORDER BY seq"
    )
    assert [r["role"] for r in rows(executor, step_rows, id=sid)] == ["user"]
    assert ledger.ran == []
    assert session_status(executor, sid) == "awaiting_approval"

    cli(executor, "deny", sid, "g1", "--reason", "no")
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    committed = rows(executor, step_rows, id=sid)
    assert [(r["step"], r["role"], r["call"]) for r in committed] == [
        (0, "user", None), (1, "assistant", None), (1, "tool", "g1"), (1, "tool", "g2"), (2, "assistant", None),
    ]
    messages = executor.get_session(sid).messages
    assert result_for(messages, "g1").content == "Tool call g1 was not approved by the user: no"
    assert result_for(messages, "g2").content == '{"refunded":2}'
    assert ledger.ran == [2]
