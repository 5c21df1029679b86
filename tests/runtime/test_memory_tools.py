"""Agent memory in runs: ``ctx.memory`` writes commit with their step, and
``memory_tools(namespace=owner_namespace("user"))`` keeps each owner's memories their own
(a second principal's session recalls and forgets nothing of the first's)."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel
from runtime_testkit import RESULT_TIMEOUT, call, calls, result_for, rows, text, unique, use_model

from helix_dbos import ToolContext, define_agent, define_tool
from helix_dbos.memory import MemoryStore, memory_tools, owner_namespace


class Fact(BaseModel):
    fact: str


def test_what_a_tool_remembers_commits_with_its_step_with_who_wrote_it(executor: Any) -> None:
    namespace = ("test", unique("ns"))

    def note(input: Fact, ctx: ToolContext) -> str:
        ctx.memory.remember(namespace, input.fact, metadata={"by": "note"})
        return "noted"

    def broken(input: Fact, ctx: ToolContext) -> str:
        ctx.memory.remember(namespace, "never stored: the tool raised")
        raise RuntimeError("boom")

    agent = define_agent(
        unique("memory-note"), tools=[define_tool("note", "Note.", Fact, note), define_tool("broken", "Break.", Fact, broken)]
    )
    executor.register(agent)
    use_model(
        executor,
        calls(call("c1", "note", {"fact": "the user likes green tea"}), call("c2", "broken", {"fact": "x"})),
        text("done"),
    )
    handle = executor.execute(agent, "go")
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"

    found = rows(
        executor,
        "SELECT content, metadata, session_id, run, step, tool_call_id FROM helix.memories WHERE namespace = %(ns)s",
        ns=list(namespace),
    )
    assert found == [
        {"content": "the user likes green tea", "metadata": {"by": "note"}, "session_id": handle.session_id,
         "run": 1, "step": 1, "tool_call_id": "c1"}
    ]


def test_a_search_in_a_tool_sees_what_earlier_steps_committed(executor: Any) -> None:
    namespace = ("test", unique("ns"))
    seen: list[list[str]] = []

    def note(input: Fact, ctx: ToolContext) -> str:
        ctx.memory.remember(namespace, input.fact)
        seen.append([h.memory.text for h in ctx.memory.search(namespace, input.fact)])
        return "noted"

    agent = define_agent(unique("memory-search"), tools=[define_tool("note", "Note.", Fact, note)])
    executor.register(agent)
    use_model(
        executor,
        calls(call("c1", "note", {"fact": "tea"})),
        calls(call("c2", "note", {"fact": "green tea"})),
        text("done"),
    )
    assert executor.execute(agent, "go").result(timeout=RESULT_TIMEOUT).status == "completed"

    assert seen == [[], ["tea"]]  # a step's own writes are not visible before its commit


def test_one_owners_agent_cannot_recall_or_forget_anothers_memories(executor: Any) -> None:
    agent = define_agent(unique("memory-owner"), tools=memory_tools(namespace=owner_namespace("user")))
    executor.register(agent)
    ana, bob = unique("ana"), unique("bob")
    use_model(executor, calls(call("r1", "remember", {"text": "Ana's door code is 4711", "key": "door"})), text("ok"))
    assert executor.execute(agent, "remember", owner=ana).result(timeout=RESULT_TIMEOUT).status == "completed"
    [ana_memory] = rows(executor, "SELECT id FROM helix.memories WHERE namespace = %(ns)s", ns=["user", ana])

    model = use_model(
        executor,
        calls(
            call("q1", "recall", {"query": "door code 4711"}),
            call("f1", "forget", {"key": "door"}),
            call("f2", "forget", {"id": ana_memory["id"]}),
        ),
        text("nothing"),
    )
    bob_handle = executor.execute(agent, "what is the door code?", owner=bob)
    assert bob_handle.result(timeout=RESULT_TIMEOUT).status == "completed"

    messages = model.inputs[-1].messages
    assert json.loads(result_for(messages, "q1").content) == {"memories": []}
    assert rows(executor, "SELECT content FROM helix.memories WHERE namespace = %(ns)s", ns=["user", ana]) == [
        {"content": "Ana's door code is 4711"}
    ]

    model = use_model(executor, calls(call("q2", "recall", {"query": "door code"})), text("4711"))
    assert executor.execute(agent, "door?", owner=ana).result(timeout=RESULT_TIMEOUT).status == "completed"
    recalled = json.loads(result_for(model.inputs[-1].messages, "q2").content)
    assert [m["text"] for m in recalled["memories"]] == ["Ana's door code is 4711"]


def test_a_session_without_an_owner_gets_an_error_not_a_shared_namespace(executor: Any) -> None:
    agent = define_agent(unique("memory-nobody"), tools=memory_tools(namespace=owner_namespace("user")))
    executor.register(agent)
    model = use_model(executor, calls(call("r1", "remember", {"text": "a secret"})), text("ok"))

    assert executor.execute(agent, "remember").result(timeout=RESULT_TIMEOUT).status == "completed"

    result = result_for(model.inputs[-1].messages, "r1")
    assert "no owner" in str(result.content)
    assert rows(executor, "SELECT count(*) AS n FROM helix.memories WHERE content = 'a secret'") == [{"n": 0}]


def test_a_memory_remembered_outside_runs_is_recalled_inside(executor: Any) -> None:
    owner = unique("cleo")
    MemoryStore(pool=executor.pool).remember(("user", owner), "Cleo is allergic to peanuts")
    agent = define_agent(unique("memory-recall"), tools=memory_tools(namespace=owner_namespace("user")))
    executor.register(agent)
    model = use_model(executor, calls(call("q", "recall", {"query": "allergies peanuts"})), text("careful"))

    assert executor.execute(agent, "dinner?", owner=owner).result(timeout=RESULT_TIMEOUT).status == "completed"

    found = json.loads(result_for(model.inputs[-1].messages, "q").content)
    assert [m["text"] for m in found["memories"]] == ["Cleo is allergic to peanuts"]
