"""``on_agent_suspended`` / ``on_agent_resumed`` for ``awaiting_children``: a
parent waiting for its sub-agents is suspended on them, and resumed when the
last has ended, before the step's messages are observed."""

from __future__ import annotations

from typing import Any

from helix_dbos import AgentHooks, create_sub_agent_tool
from runtime_testkit import RESULT_TIMEOUT, agent, call, calls, family_model, text, unique, user_input


def recording_hooks(log: list[tuple[Any, ...]]) -> AgentHooks:
    return AgentHooks(
        on_agent_suspended=lambda reason, ids, ctx: log.append(("suspended", reason, tuple(ids), ctx.step)),
        on_agent_resumed=lambda reason, ctx: log.append(("resumed", reason, ctx.step)),
        on_message=lambda message, ctx: log.append(("message", message.role)),
    )


def test_waiting_for_children_suspends_and_resumes_the_parent(executor: Any) -> None:
    log: list[tuple[Any, ...]] = []
    child = agent(unique("kid"))
    parent = agent(unique("parent"), tools=[create_sub_agent_tool(child)], hooks=recording_hooks(log))
    tool_name = f"subagent__{child.name}"

    def child_step(messages: Any) -> dict[str, Any]:
        log.append(("child runs", user_input(messages)))
        return text("did " + user_input(messages))

    family_model(executor, {
        parent: [calls(call("s1", tool_name, {"input": "a"}), call("s2", tool_name, {"input": "b"})), text("done")],
        child: [child_step],
    })
    result = executor.execute(parent, "delegate").result(timeout=RESULT_TIMEOUT)

    assert (result.status, result.output) == ("completed", "done")
    assert log == [
        ("suspended", "awaiting_children", ("s1", "s2"), 1),
        ("child runs", "a"),
        ("child runs", "b"),
        ("resumed", "awaiting_children", 1),
        ("message", "assistant"),
        ("message", "tool"),
        ("message", "tool"),
        ("message", "assistant"),
    ]


def test_no_child_started_means_no_suspension(executor: Any) -> None:
    log: list[tuple[Any, ...]] = []
    child = agent(unique("kid"))
    parent = agent(unique("parent"), tools=[create_sub_agent_tool(child)], hooks=recording_hooks(log))
    family_model(executor, {
        parent: [calls(call("g1", "subagent__no-such-agent", {"input": "?"})), text("went on")],
        child: [],
    })
    result = executor.execute(parent, "delegate").result(timeout=RESULT_TIMEOUT)

    assert (result.status, result.output) == ("completed", "went on")
    assert [entry[0] for entry in log] == ["message", "message", "message"]
