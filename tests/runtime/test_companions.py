"""Persistent sub-agents ("companions"): every companion tool, both modes, the
critic loop on a real transcript, notices, terminate and abort."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from dbos import DBOS
from pydantic import BaseModel

from helix_dbos import AgentDefinitionError, ToolContext, define_agent, define_tool, persistent_agent

from helix_dbos.types import AssistantMessage, Message, ToolResultMessage, UserMessage
from runtime_testkit import (
    RESULT_TIMEOUT,
    Gate,
    agent,
    call,
    cli,
    calls,
    family_model,
    rows,
    session_status,
    text,
    unique,
    wait_for,
)


class Verdict(BaseModel):
    score: int
    note: str


class Nothing(BaseModel):
    pass


def last_user(messages: list[Message]) -> str:
    return next(str(m.content) for m in reversed(messages) if isinstance(m, UserMessage))


def verdict(messages: list[Message]) -> dict[str, Any]:
    """The critic's answer: how many drafts it has read, and the one it reads now."""
    drafts = sum(isinstance(m, UserMessage) for m in messages)
    return calls(call(f"v{drafts}", "__finish__", {"score": drafts, "note": f"read {last_user(messages)}"}))


def results(executor: Any, session_id: str) -> dict[str, Any]:
    """The session's tool results by call id: the JSON the model read, or the error text."""
    found = {}
    for m in executor.get_session(session_id).messages:
        if isinstance(m, ToolResultMessage):
            found[m.tool_call_id] = m.content if m.is_error else json.loads(m.content)
    return found


def slow_tool(seconds: float = 1.0) -> Any:
    async def work(_: Nothing, ctx: ToolContext) -> dict[str, bool]:
        await asyncio.sleep(seconds)
        return {"worked": True}

    return define_tool("work", "Work a while.", Nothing, work)


def test_the_critic_loop_reconsults_a_completed_companion_on_its_own_transcript(executor: Any) -> None:
    critic = agent(unique("critic"), output_schema=Verdict)
    writer = agent(unique("writer"), persistent_agents=[persistent_agent(critic)])
    family_model(executor, {
        writer: [
            calls(call("s1", "companion__spawnAgent", {"agentType": critic.name, "message": "draft 1", "name": "critic"})),
            calls(call("m1", "companion__sendMessage", {"name": "critic", "message": "draft 2"})),
            calls(call("l1", "companion__listChildren"), call("g1", "companion__getChildStatus", {"name": "critic"})),
            text("published"),
        ],
        critic: [verdict, verdict],
    })
    handle = executor.execute(writer, "write")
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"

    sid = handle.session_id
    child = f"{sid}-agent-critic"
    got = results(executor, sid)
    assert got["s1"] == {"name": "critic", "sessionId": child, "status": "completed",
                         "output": {"score": 1, "note": "read draft 1"}}
    assert got["m1"]["output"] == {"score": 2, "note": "read draft 2"}  # a fresh verdict, with the first in memory
    assert got["l1"] == {"children": [{"name": "critic", "agentType": critic.name, "mode": "blocking", "sessionId": child,
                                       "status": "completed", "output": {"score": 2, "note": "read draft 2"}}]}
    assert got["g1"]["output"]["score"] == 2
    transcript = executor.get_session(child).messages
    assert [m.role for m in transcript] == ["user", "assistant", "tool", "user", "assistant", "tool"]
    assert [r.status for r in executor.list_runs(child)] == ["completed", "completed"]
    assert rows(executor, "SELECT p.id AS parent, r.id AS root FROM helix.sessions s"
                          " JOIN helix.sessions p ON p.num = s.parent_session_num"
                          " JOIN helix.sessions r ON r.num = s.root_session_num WHERE s.id = %(c)s", c=child) == [
        {"parent": sid, "root": sid}
    ]
    shown = cli(executor, "show", sid).stdout.splitlines()
    tree = shown[shown.index("sub-agent and companion sessions") + 2:]
    assert tree[0].split() == [child, critic.name, "completed", "2", "companion:critic"]


def test_names_modes_and_bad_calls(executor: Any) -> None:
    helper = agent(unique("helper"))
    parent = agent(unique("boss"), persistent_agents=[persistent_agent(helper, "non-blocking")])
    assert "companion__waitForResult" not in {t.name for t in parent.tool_specs()}  # no blocking kind
    family_model(executor, {
        parent: [
            calls(
                call("a", "companion__spawnAgent", {"agentType": helper.name, "message": "one"}),
                call("b", "companion__spawnAgent", {"agentType": helper.name, "message": "two"}),
                call("c", "companion__spawnAgent", {"agentType": "nobody", "message": "x"}),
                call("d", "companion__sendMessage", {"name": "ghost", "message": "x"}),
                call("e", "companion__spawnAgent", {"agentType": helper.name, "message": "x", "name": "bad name!"}),
                call("f", "companion__getChildStatus", {}),
            ),
            text("ok"),
        ],
        helper: [text("helped"), text("helped again")],
    })
    handle = executor.execute(parent, "go")
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    sid = handle.session_id
    got = results(executor, sid)
    assert got["a"] == {"name": f"{helper.name}-1", "sessionId": f"{sid}-agent-{helper.name}-1", "status": "started"}
    assert got["b"]["name"] == f"{helper.name}-2"
    assert "unknown agent type 'nobody'" in got["c"]
    assert "no companion named 'ghost'" in got["d"]
    assert "1-64 letters" in got["e"]
    assert "Invalid arguments" in got["f"]
    for name in ("1", "2"):
        wait_for(lambda n=name: session_status(executor, f"{sid}-agent-{helper.name}-{n}") == "completed",
                 what="the non-blocking companions")
    with pytest.raises(AgentDefinitionError, match="reserved for the companion tools"):
        define_agent("x", tools=[define_tool("companion__mine", "x", Nothing, lambda a, c: {})])
    with pytest.raises(AgentDefinitionError, match="duplicate persistent agent type"):
        define_agent("x", persistent_agents=[persistent_agent(helper), persistent_agent(helper)])


def test_a_non_blocking_companion_reaches_the_parent_transcript_once_at_its_next_step(executor: Any) -> None:
    helper = agent(unique("researcher"))
    seen: list[str] = []

    def wait_child(_: Nothing, ctx: ToolContext) -> dict[str, bool]:
        wait_for(lambda: session_status(executor, f"{ctx.session_id}-agent-r") == "completed", timeout=RESULT_TIMEOUT,
                 what="the companion")
        return {"ready": True}

    def after_notice(messages: list[Message]) -> dict[str, Any]:
        seen.append(str(messages[-1].content))
        return text("thanks")

    parent = agent(unique("lead"), tools=[define_tool("wait_child", "Wait.", Nothing, wait_child)],
                   persistent_agents=[persistent_agent(helper, "non-blocking")])
    family_model(executor, {
        parent: [
            calls(call("s", "companion__spawnAgent", {"agentType": helper.name, "message": "find", "name": "r"})),
            calls(call("w", "wait_child")),
            after_notice,
        ],
        helper: [text("found it")],
    })
    handle = executor.execute(parent, "go")
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    sid = handle.session_id
    assert seen == ["[companion r completed] found it"]  # the last message the model read at step 3
    transcript = executor.get_session(sid).messages
    notices = [m for m in transcript if isinstance(m, UserMessage) and m.content.startswith("[companion")]
    assert len(notices) == 1
    roles = [m.role for m in transcript]
    assert roles == ["user", "assistant", "tool", "assistant", "tool", "user", "assistant"]
    assert rows(executor, "SELECT run, delivered_run, delivered_step FROM helix.companion_notices WHERE session_num = helix.session_num(%(s)s)",
                s=sid) == [{"run": 1, "delivered_run": 1, "delivered_step": 3}]


def test_send_interrupts_a_running_companion_and_wait_for_result_gets_its_answer(executor: Any) -> None:
    worker = agent(unique("slowpoke"), tools=[slow_tool()])
    critic = agent(unique("judge"), output_schema=Verdict)
    boss = agent(unique("manager"), persistent_agents=[persistent_agent(worker, "non-blocking"), persistent_agent(critic)])
    assert "companion__waitForResult" in {t.name for t in boss.tool_specs()}
    family_model(executor, {
        boss: [
            calls(call("s", "companion__spawnAgent", {"agentType": worker.name, "message": "job 1", "name": "w"})),
            calls(call("m", "companion__sendMessage", {"name": "w", "message": "job 2"})),
            calls(call("r", "companion__waitForResult", {"name": "w"})),
            calls(call("t", "companion__terminateChild", {"name": "w"})),
            text("done"),
        ],
        worker: [calls(call("k1", "work")), calls(call("k2", "work")), lambda m: text(f"finished {last_user(m)}")],
        critic: [],
    })
    handle = executor.execute(boss, "go")
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    sid, child = handle.session_id, f"{handle.session_id}-agent-w"
    got = results(executor, sid)
    assert got["m"]["status"] == "started"
    assert got["r"] == {"name": "w", "sessionId": child, "status": "completed", "output": "finished job 2"}
    assert got["t"]["status"] == "completed"  # nothing was running any more
    assert [r.status for r in executor.list_runs(child)] == ["interrupted", "completed"]
    # the answer came as the tool's result: its notice is not delivered again
    transcript = executor.get_session(sid).messages
    assert not [m for m in transcript if isinstance(m, UserMessage) and m.content.startswith("[companion")]


def test_terminate_stops_a_running_companion(executor: Any) -> None:
    gate = Gate()
    worker = agent(unique("stuck"), tools=[gate.tool()])
    entered = define_tool("entered", "Wait until the companion works.", Nothing, lambda a, c: gate.wait_entered() or {})
    boss = agent(unique("stopper"), tools=[entered], persistent_agents=[persistent_agent(worker, "non-blocking")])
    family_model(executor, {
        boss: [
            calls(call("s", "companion__spawnAgent", {"agentType": worker.name, "message": "go", "name": "x"})),
            calls(call("e", "entered")),
            calls(call("t", "companion__terminateChild", {"name": "x", "reason": "enough"})),
            text("stopped"),
        ],
        worker: [calls(call("g", "wait_here")), text("never")],
    })
    handle = executor.execute(boss, "go")
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    child = f"{handle.session_id}-agent-x"
    assert results(executor, handle.session_id)["t"]["status"] == "aborted"
    assert session_status(executor, child) == "aborted"
    assert executor.get_current_run(child).error == "enough"
    assert DBOS.get_workflow_status(f"helix:{child}:run:1").status == "CANCELLED"


def test_abort_of_the_parent_reaches_its_companions(executor: Any) -> None:
    child_gate, parent_gate = Gate(), Gate()
    worker = agent(unique("busy"), tools=[child_gate.tool()])
    boss = agent(unique("owner"), tools=[parent_gate.tool("hold")],
                 persistent_agents=[persistent_agent(worker, "non-blocking")])
    family_model(executor, {
        boss: [
            calls(call("s", "companion__spawnAgent", {"agentType": worker.name, "message": "go", "name": "b"})),
            calls(call("h", "hold")),
            text("never"),
        ],
        worker: [calls(call("g", "wait_here")), text("never")],
    })
    handle = executor.execute(boss, "go")
    child_gate.wait_entered()
    parent_gate.wait_entered()
    assert executor.abort(handle.session_id) is True
    assert handle.result(timeout=RESULT_TIMEOUT).status == "aborted"
    child = f"{handle.session_id}-agent-b"
    assert session_status(executor, child) == "aborted"
    wait_for(lambda: DBOS.get_workflow_status(f"helix:{child}:run:1").status == "CANCELLED", what="the companion cancelled")
    assert [m.role for m in executor.get_session(child).messages] == ["user"]  # it never committed a step
    assert isinstance(executor.get_session(handle.session_id).messages[1], AssistantMessage)


def test_interrupt_of_the_parent_reaches_its_companions(executor: Any) -> None:
    child_gate, parent_gate = Gate(), Gate()
    worker = agent(unique("pausable"), tools=[child_gate.tool()])
    boss = agent(unique("pauser"), tools=[parent_gate.tool("hold")],
                 persistent_agents=[persistent_agent(worker, "non-blocking")])
    family_model(executor, {
        boss: [calls(call("s", "companion__spawnAgent", {"agentType": worker.name, "message": "go", "name": "p"})),
               calls(call("h", "hold")), text("never")],
        worker: [calls(call("g", "wait_here")), text("never")],
    })
    handle = executor.execute(boss, "go")
    child_gate.wait_entered()
    parent_gate.wait_entered()
    assert executor.interrupt(handle.session_id) is True
    child_gate.open()
    parent_gate.open()
    assert handle.result(timeout=RESULT_TIMEOUT).status == "interrupted"
    wait_for(lambda: session_status(executor, f"{handle.session_id}-agent-p") == "interrupted",
             what="the companion interrupted")


def test_a_session_made_elsewhere_under_a_companion_name_is_never_adopted(executor: Any) -> None:
    helper = agent(unique("mate"))
    parent = agent(unique("claimer"), persistent_agents=[persistent_agent(helper)])
    sid = unique("claimer-session")
    family_model(executor, {
        parent: [calls(call("s", "companion__spawnAgent", {"agentType": helper.name, "message": "hi", "name": "m"})),
                 text("ok")],
        helper: [text("squatter"), text("never")],
    })
    squatter = executor.execute(helper, "mine", session_id=f"{sid}-agent-m")  # someone else's session
    assert squatter.result(timeout=RESULT_TIMEOUT).status == "completed"
    handle = executor.execute(parent, "go", session_id=sid)
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    assert "already exists and was not created by this call" in results(executor, sid)["s"]
    assert [r.status for r in executor.list_runs(f"{sid}-agent-m")] == ["completed"]  # untouched
    assert rows(executor, "SELECT count(*) AS n FROM helix.companions WHERE session_num = helix.session_num(%(s)s)", s=sid) == [{"n": 0}]
