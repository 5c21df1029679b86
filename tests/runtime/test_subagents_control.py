"""Sub-agents under control: approvals inside a child, abort and interrupt of the parent.

A child that waits for approval shows in its root's pending list and is answered by
another process; abort and interrupt of the parent reach its running children.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

import pytest
from dbos import DBOS
from pydantic import BaseModel
from runtime_testkit import (
    Step,
    RESULT_TIMEOUT,
    Gate,
    agent,
    assert_paired,
    call,
    calls,
    events,
    family_model,
    last_result,
    result_for,
    rows,
    session_status,
    sub,
    text,
    unique,
    wait_for,
)

from helix_dbos import (
    AgentConfig,
    ToolContext,
    create_sub_agent_tool,
    define_tool,
)
from helix_dbos._durable.payloads import run_workflow_id


def workflow_status(session_id: str, run: int = 1) -> str | None:
    status = DBOS.get_workflow_status(run_workflow_id(session_id, run))
    return status.status if status else None


class Transfer(BaseModel):
    amount: int


def transfer_tool(ledger: list[int]) -> Any:
    def transfer(args: Transfer, ctx: ToolContext) -> dict[str, Any]:
        ledger.append(args.amount)
        return {"transferred": args.amount}

    return define_tool("transfer", "Move money (needs approval).", Transfer, transfer, require_approval=True)


# --- approval inside a child ----------------------------------------------------------------

APPROVE_FROM_ANOTHER_PROCESS = """
import sys
from helix_dbos import admin

url, session_id, call_id = sys.argv[1:4]
print(admin.approve(url, session_id, call_id, approver="ops", reason="looks right").status)
"""


def approve_from_another_process(database_url: str, session_id: str, call_id: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", APPROVE_FROM_ANOTHER_PROCESS, database_url, session_id, call_id],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


def test_an_approval_inside_a_child_is_pending_under_the_root_and_another_process_answers_it(executor):
    ledger: list[int] = []
    child = agent(unique("payer"), tools=[transfer_tool(ledger)])
    parent = agent(unique("treasurer"), tools=[create_sub_agent_tool(child)])
    family_model(executor, {
        parent: [
            calls(call("p1", f"subagent__{child.name}", {"input": "pay 42"})),
            lambda m: text(f"treasurer: {json.loads(last_result(m).content)}"),
        ],
        child: [
            calls(call("t1", "transfer", {"amount": 42})),
            lambda m: text(f"paid, {last_result(m).content}"),
        ],
    })

    handle = executor.execute(parent, "pay the bill")
    root = handle.session_id
    child_id = sub(root, "p1")
    pending = wait_for(lambda: executor.list_pending(root), what="the child's approval request")

    assert [(p.session_id, p.tool_call_id, p.root_session_id, p.kind, p.tool_name, p.input, p.status) for p in pending] == [
        (child_id, "t1", root, "approval", "transfer", {"amount": 42}, "pending")
    ]
    assert executor.get_session(child_id).pending == pending  # the child's own pending call
    assert executor.get_session(root).pending == []  # the root itself waits on nothing but the child
    assert (session_status(executor, child_id), session_status(executor, root)) == ("awaiting_approval", "active")
    assert ledger == []

    assert approve_from_another_process(executor.database_url, child_id, "t1") == "accepted"
    result = handle.result(timeout=RESULT_TIMEOUT)

    assert (result.status, result.output) == ("completed", 'treasurer: paid, {"transferred":42}')
    assert ledger == [42]
    assert executor.list_pending(root) == []
    assert session_status(executor, child_id) == "completed"
    assert_paired(executor.get_session(child_id).messages)
    assert_paired(executor.get_session(root).messages)
    audit = rows(executor, "SELECT answered_by, approved FROM helix.tool_call_answers WHERE session_num = helix.session_num(%(s)s)", s=child_id)
    assert audit == [{"answered_by": "ops", "approved": True}]
    # The request and its answer show in the parent's stream, tagged with the child.
    tagged = [e["data"]["event"]["type"] for e in events(executor, root) if e["type"] == "subagent_event"]
    assert "tool_approval_request" in tagged


# --- abort --------------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [1, 2], ids=["child", "grandchild"])
def test_abort_of_the_parent_cancels_descendants_blocked_in_a_tool(executor, depth):
    gate = Gate()
    leaf = agent(unique("blocked"), tools=[gate.tool()])
    scripts: dict[AgentConfig, list[Step]] = {leaf: [calls(call("g1", "wait_here")), text("never")]}
    below = leaf
    for level in range(depth):  # each level above delegates to the one below with call "a1"
        above = agent(unique(f"aborter{level}"), tools=[create_sub_agent_tool(below)])
        scripts[above] = [calls(call("a1", f"subagent__{below.name}", {"input": "wait"})), text("never")]
        below = above
    mock = family_model(executor, scripts)

    handle = executor.execute(below, "start and abort")
    root = handle.session_id
    tree = [root]
    for _ in range(depth):
        tree.append(sub(tree[-1], "a1"))
    gate.wait_entered()
    assert [session_status(executor, sid) for sid in tree] == ["active"] * (depth + 1)

    assert executor.abort(root, reason="operator stop") is True
    result = handle.result(timeout=RESULT_TIMEOUT)
    assert result.status == "aborted"

    for session_id in tree:
        session = executor.get_session(session_id)
        assert (session.status, session.error, session.step_count) == ("aborted", "operator stop", 0), session_id
        assert [(r.run, r.status) for r in executor.list_runs(session_id)] == [(1, "aborted")], session_id
        assert events(executor, session_id)[-1]["type"] == "aborted", session_id
        assert wait_for(lambda sid=session_id: workflow_status(sid) == "CANCELLED", what=f"{session_id} cancelled")
    # The blocked tool returns now; the cancelled sessions take no further step.
    calls_before = len(mock.inputs)
    gate.open()
    assert gate.left.wait(5)
    time.sleep(0.3)
    assert len(mock.inputs) == calls_before == depth + 1
    assert [session_status(executor, sid) for sid in tree] == ["aborted"] * (depth + 1)
    assert executor.get_session(tree[-1]).step_count == 0
    assert executor.abort(root) is False  # nothing left running


def test_abort_of_the_parent_cancels_a_child_waiting_for_approval(executor):
    ledger: list[int] = []
    child = agent(unique("slow-payer"), tools=[transfer_tool(ledger)])
    parent = agent(unique("impatient"), tools=[create_sub_agent_tool(child)])
    family_model(executor, {
        parent: [calls(call("p1", f"subagent__{child.name}", {"input": "pay"})), text("never")],
        child: [calls(call("t1", "transfer", {"amount": 7})), text("never")],
    })

    handle = executor.execute(parent, "pay then give up")
    root = handle.session_id
    child_id = sub(root, "p1")
    wait_for(lambda: executor.list_pending(root), what="the child's approval request")
    waiter = f"{run_workflow_id(child_id, 1)}:wait:1"  # the child parked at its approval: its waiter holds it
    wait_for(lambda: DBOS.get_workflow_status(waiter) is not None, what="the child's waiter")  # starts after the call

    assert executor.abort(root) is True
    assert handle.result(timeout=RESULT_TIMEOUT).status == "aborted"
    assert (session_status(executor, root), session_status(executor, child_id)) == ("aborted", "aborted")
    assert wait_for(lambda: DBOS.get_workflow_status(waiter).status == "CANCELLED", what="the child's waiter cancelled")
    assert executor.list_pending(root) == []
    assert [r["status"] for r in rows(executor, "SELECT status FROM helix.pending_tool_calls WHERE session_num = helix.session_num(%(s)s)",
                                      s=child_id)] == ["cancelled"]
    assert ledger == []


# --- interrupt ------------------------------------------------------------------------------


def test_interrupt_of_the_parent_reaches_a_running_child_then_the_parent_stops(executor):
    gate = Gate()
    child = agent(unique("interruptible"), tools=[gate.tool()])
    parent = agent(unique("interrupter"), tools=[create_sub_agent_tool(child)])
    mock = family_model(executor, {
        parent: [calls(call("i1", f"subagent__{child.name}", {"input": "work"})), text("never")],
        child: [calls(call("g1", "wait_here")), text("never either")],
    })

    handle = executor.execute(parent, "start then interrupt")
    root = handle.session_id
    child_id = sub(root, "i1")
    gate.wait_entered()

    assert executor.interrupt(root) is True
    flags = {r["id"]: r["interrupt_requested"] for r in rows(
        executor, "SELECT id, interrupt_requested FROM helix.sessions WHERE root_session_num = helix.session_num(%(r)s)", r=root)}
    assert flags == {root: True, child_id: True}
    gate.open()
    result = handle.result(timeout=RESULT_TIMEOUT)

    assert (result.status, result.step_count) == ("interrupted", 1)
    child_session = executor.get_session(child_id)
    # The child finished the step it was in (its tool result is committed) and stopped.
    assert (child_session.status, child_session.stop_reason, child_session.step_count) == ("interrupted", "interrupted", 1)
    assert [m.role for m in child_session.messages] == ["user", "assistant", "tool"]
    assert_paired(child_session.messages)
    parent_messages = executor.get_session(root).messages
    assert_paired(parent_messages)
    delegated = result_for(parent_messages, "i1")
    assert delegated.is_error and "interrupted" in delegated.content
    assert len(mock.inputs) == 2  # one model call each; neither went on
    assert executor.get_session(root).status == "interrupted"
    finishes = [e["data"]["status"] for e in events(executor, root) if e["type"] == "subagent_finish"]
    assert finishes == ["interrupted"]
