"""Lifecycle hooks (seeds 003, 004): the canonical order per tool call, per step and at
completion; sync and async hooks; hooks that raise never break a run."""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel

from helix_dbos import AgentHooks, ToolContext, define_agent, define_tool
from helix_dbos.types import AgentResult, StepInfo, ToolResultMessage, Usage
from runtime_testkit import (
    RESULT_TIMEOUT,
    assert_paired,
    call,
    calls,
    finish,
    text,
    unique,
    usage_rows,
    use_model,
)


class Item(BaseModel):
    name: str


class Basket(BaseModel):
    items: list[str] = []


def run(executor: Any, agent: Any) -> tuple[Any, Any]:
    handle = executor.execute(agent, "go")
    return handle, handle.result(timeout=RESULT_TIMEOUT)


class Recorder:
    """Hooks that log what fired, in order; odd ones sync, even ones async."""

    def __init__(self) -> None:
        self.log: list[tuple[Any, ...]] = []
        self.results: list[AgentResult] = []
        self.usages: list[Usage] = []

    def hooks(self) -> AgentHooks:
        def before_tool(call_: Any, ctx: ToolContext) -> None:
            self.log.append(("before_tool", call_.id))

        async def on_state_change(state: Any, ctx: ToolContext) -> None:
            await asyncio.sleep(0)
            self.log.append(("on_state_change", ctx.tool_call_id, tuple(state["items"])))

        def on_message(message: Any, ctx: Any) -> None:
            key = message.tool_call_id if isinstance(message, ToolResultMessage) else message.role
            self.log.append(("on_message", key))

        async def after_tool(call_: Any, result: ToolResultMessage, ctx: Any) -> None:
            await asyncio.sleep(0)
            assert result.tool_call_id == call_.id
            self.log.append(("after_tool", call_.id))

        def on_step_finish(step: StepInfo, ctx: Any) -> None:
            assert step.step == ctx.step
            self.usages.append(step.usage)
            self.log.append(("on_step_finish", ctx.step))

        async def on_agent_complete(result: AgentResult, ctx: Any) -> None:
            self.results.append(result)
            self.log.append(("on_agent_complete", result.status))

        return AgentHooks(
            before_tool=before_tool,
            on_state_change=on_state_change,
            on_message=on_message,
            after_tool=after_tool,
            on_step_finish=on_step_finish,
            on_agent_complete=on_agent_complete,
        )

    def tool(self, name: str = "add", **options: Any) -> Any:
        def add(i: Item, ctx: ToolContext) -> dict:
            self.log.append(("execute", ctx.tool_call_id))
            ctx.update_state(lambda draft: draft.items.append(i.name))
            return {"added": i.name}

        return define_tool(name, "Add an item.", Item, add, **options)

    def names(self) -> list[str]:
        return [entry[0] for entry in self.log]


def test_hooks_fire_in_the_canonical_order_for_a_tool_call(executor):
    rec = Recorder()

    class Out(BaseModel):
        ok: bool

    agent = define_agent(unique("hooks"), tools=[rec.tool()], state_schema=Basket, output_schema=Out, hooks=rec.hooks())
    use_model(executor, calls(call("c1", "add", {"name": "apple"})), finish("f1", ok=True))
    _, result = run(executor, agent)
    assert result.status == "completed"
    assert rec.log == [
        ("before_tool", "c1"),
        ("execute", "c1"),
        ("on_state_change", "c1", ("apple",)),
        ("on_message", "assistant"),
        ("on_message", "c1"),
        ("after_tool", "c1"),
        ("on_step_finish", 1),
        # the __finish__ step: its messages, but no tool hooks for the framework's tool
        ("on_message", "assistant"),
        ("on_message", "f1"),
        ("on_step_finish", 2),
        ("on_agent_complete", "completed"),
    ]
    assert rec.results[0].output == {"ok": True}


def test_each_parallel_call_gets_the_canonical_order(executor):
    rec = Recorder()
    agent = define_agent(unique("hooks-par"), tools=[rec.tool()], state_schema=Basket, hooks=rec.hooks())
    use_model(executor, calls(call("c1", "add", {"name": "a"}), call("c2", "add", {"name": "b"})), text("done"))
    _, result = run(executor, agent)
    assert result.status == "completed"
    for call_id in ("c1", "c2"):
        mine = [e[0] for e in rec.log if call_id in e]
        assert mine == ["before_tool", "execute", "on_state_change", "on_message", "after_tool"], rec.log
    # Messages and after_tool follow call order.
    assert [e for e in rec.log if e[0] in ("on_message", "after_tool")][:5] == [
        ("on_message", "assistant"),
        ("on_message", "c1"),
        ("on_message", "c2"),
        ("after_tool", "c1"),
        ("after_tool", "c2"),
    ]
    assert rec.names().count("on_step_finish") == 2
    assert rec.names()[-1] == "on_agent_complete"
    assert rec.results[0].output == "done"


def test_on_agent_complete_fires_on_the_finish_with_path(executor):
    rec = Recorder()
    agent = define_agent(
        unique("hooks-fw"), tools=[rec.tool("submit", finish_with=True)], state_schema=Basket, hooks=rec.hooks()
    )
    use_model(executor, calls(call("s1", "submit", {"name": "final"})))
    _, result = run(executor, agent)
    assert (result.status, result.output) == ("completed", {"added": "final"})
    assert rec.names() == [
        "before_tool", "execute", "on_state_change", "on_message", "on_message", "after_tool",
        "on_step_finish", "on_agent_complete",
    ]
    assert [(r.status, r.output) for r in rec.results] == [("completed", {"added": "final"})]


def test_on_agent_complete_does_not_fire_when_the_run_fails(executor):
    rec = Recorder()
    agent = define_agent(unique("hooks-fail"), hooks=rec.hooks())
    use_model(executor, {"type": "error", "error": "nope"})
    _, result = run(executor, agent)
    assert result.status == "failed"
    assert "on_agent_complete" not in rec.names()
    assert rec.names() == ["on_step_finish"]


def test_on_step_finish_receives_each_steps_usage(executor):
    rec = Recorder()
    agent = define_agent(unique("hooks-usage"), tools=[rec.tool()], state_schema=Basket, hooks=rec.hooks())
    use_model(executor, calls(call("c1", "add", {"name": "a"})), text("done"))
    handle, _ = run(executor, agent)
    llm = [r for r in usage_rows(executor, handle.session_id) if r["source"] == "llm"]
    assert [(u.input_tokens, u.output_tokens) for u in rec.usages] == [(r["input_tokens"], r["output_tokens"]) for r in llm]
    assert all(u.total_tokens > 0 for u in rec.usages)


def test_raising_hooks_never_break_the_run(executor):
    fired: list[str] = []

    def boom(name: str) -> Any:
        def hook(*args: Any) -> None:
            fired.append(name)
            raise RuntimeError(f"{name} is broken")

        return hook

    def aboom(name: str) -> Any:
        async def hook(*args: Any) -> None:
            fired.append(name)
            raise RuntimeError(f"{name} is broken")

        return hook

    hooks = AgentHooks(
        before_tool=boom("before_tool"),
        after_tool=aboom("after_tool"),
        on_state_change=boom("on_state_change"),
        on_message=aboom("on_message"),
        on_step_finish=boom("on_step_finish"),
        on_agent_complete=aboom("on_agent_complete"),
    )
    rec = Recorder()
    agent = define_agent(unique("hooks-raise"), tools=[rec.tool()], state_schema=Basket, hooks=hooks)
    use_model(executor, calls(call("c1", "add", {"name": "a"})), text("still fine"))
    handle, result = run(executor, agent)
    assert (result.status, result.output) == ("completed", "still fine")
    assert set(fired) == {"before_tool", "after_tool", "on_state_change", "on_message", "on_step_finish", "on_agent_complete"}
    session = executor.get_session(handle.session_id)
    assert session.state == {"items": ["a"]}  # the tool's work is kept
    tool_result = [m for m in session.messages if isinstance(m, ToolResultMessage)][0]
    assert tool_result.is_error is False  # a broken before_tool does not fail the tool
    assert_paired(session.messages)


def test_post_commit_hooks_see_the_state_read_only_and_a_write_is_refused_loudly(executor: Any, caplog: Any) -> None:
    """A hook after the step's commit cannot change the state silently: its write raises,
    the hook's error is logged, and the committed state stands."""
    seen: list[Any] = []

    def after_tool(call_: Any, result: Any, ctx: Any) -> None:
        seen.append(ctx.get_state())
        ctx.update_state(lambda draft: draft.items.append("from a hook"))

    def add_item(args: Item, ctx: ToolContext) -> dict[str, str]:
        ctx.update_state(lambda draft: draft.items.append(args.name))
        return {"added": args.name}

    add = define_tool("add", "Add.", Item, add_item)
    agent = define_agent(unique("ro-hooks"), system_prompt="x", tools=[add], state_schema=Basket,
                         hooks=AgentHooks(after_tool=after_tool))
    use_model(executor, calls(call("a1", "add", {"name": "pear"})), text("done"))
    with caplog.at_level("ERROR", logger="helix_dbos"):
        handle, result = run(executor, agent)

    assert result.status == "completed"
    assert executor.get_session(handle.session_id).state == {"items": ["pear"]}
    assert seen == [{"items": ["pear"]}]
    assert any("this context's state is read-only" in r.getMessage() + str(r.exc_info) for r in caplog.records)
