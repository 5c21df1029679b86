"""Lifecycle hooks: the canonical order per tool call, per step and at
completion; sync and async hooks; hooks that raise never break a run; what hooks write
to the state is kept (one follow-up save per step that changed it)."""

from __future__ import annotations

import asyncio
from typing import Any

from dbos import DBOS
from pydantic import BaseModel

from helix_dbos import AgentHooks, ApprovalResponse, ReadOnlyStateError, ToolContext, define_agent, define_tool
from helix_dbos._durable import loop
from helix_dbos.types import AgentResult, StepInfo, ToolResultMessage, Usage
from runtime_testkit import (
    RESULT_TIMEOUT,
    assert_paired,
    call,
    calls,
    finish,
    rows,
    text,
    unique,
    usage_rows,
    use_model,
    wait_for,
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


# --- what hooks write to the state (saved once) ------------------------------------------------------


class Tally(BaseModel):
    items: list[str] = []
    messages: int = 0
    after: list[str] = []
    steps: int = 0
    done: bool = False


def add_item(args: Item, ctx: ToolContext) -> dict[str, str]:
    ctx.update_state(lambda draft: draft.items.append(args.name))
    return {"added": args.name}


def tally_hooks(seen: list[Any]) -> AgentHooks:
    """Every post-commit hook kind writes; after_tool also records what it sees."""

    def on_message(message: Any, ctx: Any) -> None:
        ctx.update_state(lambda d: setattr(d, "messages", d.messages + 1))

    async def after_tool(call_: Any, result: Any, ctx: Any) -> None:
        seen.append(ctx.get_state().dump())
        ctx.update_state(lambda d: d.after.append(call_.id))

    def on_step_finish(step: StepInfo, ctx: Any) -> None:
        ctx.update_state(lambda d: setattr(d, "steps", d.steps + 1))

    async def on_agent_complete(result: Any, ctx: Any) -> None:
        ctx.update_state(lambda d: setattr(d, "done", True))

    return AgentHooks(on_message=on_message, after_tool=after_tool, on_step_finish=on_step_finish,
                      on_agent_complete=on_agent_complete)


AFTER_STEP_1 = {"items": ["pear"], "messages": 2, "after": ["a1"], "steps": 1, "done": False}
AFTER_STEP_2 = {"items": ["pear"], "messages": 3, "after": ["a1"], "steps": 2, "done": True}


def test_every_post_commit_hook_kinds_write_is_kept_in_the_state_the_patch_log_and_the_stream(executor: Any) -> None:
    seen: list[Any] = []
    agent = define_agent(unique("hook-writes"), tools=[define_tool("add", "Add.", Item, add_item)], state_schema=Tally,
                         hooks=tally_hooks(seen))
    use_model(executor, calls(call("a1", "add", {"name": "pear"})), text("done"))
    handle, result = run(executor, agent)
    sid = handle.session_id

    assert result.status == "completed"
    # A hook writes against the committed state: the tool's write and the earlier hooks' are in it.
    assert seen == [{"items": ["pear"], "messages": 2, "after": [], "steps": 0, "done": False}]
    assert executor.get_session(sid).state == AFTER_STEP_2
    assert [executor.get_session(sid, at_step=n).state for n in (1, 2)] == [AFTER_STEP_1, AFTER_STEP_2]
    log = rows(executor, "SELECT step, part, patch FROM helix.state_patches WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %(s)s) ORDER BY step, part", s=sid)
    assert [(r["step"], r["part"]) for r in log] == [(1, 0), (1, 1), (2, 1)]
    assert log[0]["patch"] == [{"op": "add", "path": "/items/-", "value": "pear"}]
    assert sorted(log[2]["patch"], key=lambda op: op["path"]) == [
        {"op": "replace", "path": "/done", "value": True},
        {"op": "replace", "path": "/messages", "value": 3},
        {"op": "replace", "path": "/steps", "value": 2},
    ]
    streamed = [(e.step, e.type, e.data) for e in executor.stream(sid, follow=False, until_run_end=False)]
    patches = [(step, data["patches"]) for step, kind, data in streamed if kind == "state_patch"]
    assert patches == [(1, log[0]["patch"]), (1, log[1]["patch"]), (2, log[2]["patch"])]
    # The step's hook patch follows its commit's events; the last step's follows its finish.
    types = [kind for _, kind, _ in streamed]
    assert types.index("state_patch", types.index("step_finish")) > types.index("step_finish")
    assert types[-2:] == ["finish", "state_patch"]


def test_a_hook_write_on_a_snapshot_step_is_in_the_snapshot(executor: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr(loop, "SNAPSHOT_EVERY_STEPS", 1)
    agent = define_agent(unique("hook-snap"), tools=[define_tool("add", "Add.", Item, add_item)], state_schema=Tally,
                         hooks=tally_hooks([]))
    use_model(executor, calls(call("a1", "add", {"name": "pear"})), text("done"))
    handle, _ = run(executor, agent)
    snapshots = rows(executor, "SELECT step, state FROM helix.state_snapshots WHERE session_num = helix.session_num(%(s)s) AND step > 0"
                     " ORDER BY step", s=handle.session_id)
    assert snapshots == [{"step": 1, "state": AFTER_STEP_1}, {"step": 2, "state": AFTER_STEP_2}]
    assert executor.get_session(handle.session_id, at_step=1).state == AFTER_STEP_1


def test_a_hook_write_the_schema_refuses_is_logged_and_nothing_is_saved(executor: Any, caplog: Any) -> None:
    def on_step_finish(step: StepInfo, ctx: Any) -> None:
        ctx.update_state(lambda d: setattr(d, "steps", "many"))

    agent = define_agent(unique("hook-invalid"), state_schema=Tally, hooks=AgentHooks(on_step_finish=on_step_finish))
    use_model(executor, text("done"))
    with caplog.at_level("ERROR", logger="helix_dbos"):
        handle, result = run(executor, agent)
    assert result.status == "completed"
    assert executor.get_session(handle.session_id).state == Tally().model_dump()
    assert any("on_step_finish" in r.getMessage() for r in caplog.records)
    assert recorded_steps(handle) == ["helix_begin_run", "llm"]


def test_hooks_that_write_nothing_add_no_step_and_no_patch(executor: Any) -> None:
    read: list[Any] = []
    hooks = AgentHooks(
        on_message=lambda message, ctx: read.append(ctx.get_state().dump()),
        after_tool=lambda call_, result, ctx: ctx.update_state(lambda d: None),  # a no-op write
        on_step_finish=lambda step_result, usage, ctx: read.append(ctx.get_state().dump()),
    )
    agent = define_agent(unique("hook-reads"), tools=[define_tool("add", "Add.", Item, add_item)], state_schema=Basket,
                         hooks=hooks)
    use_model(executor, calls(call("a1", "add", {"name": "pear"})), text("done"))
    handle, result = run(executor, agent)
    assert result.status == "completed" and read[-1] == {"items": ["pear"]}
    assert recorded_steps(handle) == [
        "helix_begin_run", "llm", "tool:add", "llm",
    ]
    log = rows(executor, "SELECT step, part FROM helix.state_patches WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %(s)s)", s=handle.session_id)
    assert log == [{"step": 1, "part": 0}]


def recorded_steps(handle: Any) -> list[str]:
    return [step["function_name"] for step in DBOS.list_workflow_steps(handle.workflow_id)]


# --- where the state cannot change -----------------------------------------------------------


def test_an_approval_predicate_cannot_write_the_state_and_its_call_then_needs_approval(executor: Any, caplog: Any) -> None:
    """The predicate runs in the approval_gate step and only decides: its write raises
    ReadOnlyStateError, which (like any predicate that raises) asks for approval."""

    def judge(args: Item, ctx: ToolContext) -> bool:
        ctx.update_state(lambda draft: draft.items.append("judged"))
        return False

    gated = define_tool("add", "Add.", Item, add_item, require_approval=judge)
    agent = define_agent(unique("gate-write"), tools=[gated], state_schema=Basket)
    use_model(executor, calls(call("g1", "add", {"name": "pear"})), text("done"))
    with caplog.at_level("WARNING", logger="helix_dbos"):
        handle = executor.execute(agent, "go")
        wait_for(lambda: executor.list_pending(handle.session_id), timeout=RESULT_TIMEOUT, what="the gated call")
    refusals = [r for r in caplog.records if r.exc_info and isinstance(r.exc_info[1], ReadOnlyStateError)]
    assert refusals and "require_approval predicates only decide" in str(refusals[0].exc_info[1])
    executor.submit_tool_result(handle.session_id, ApprovalResponse(tool_call_id="g1", approved=True))
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    assert executor.get_session(handle.session_id).state == {"items": ["pear"]}


def test_suspension_hooks_see_the_state_read_only(executor: Any, caplog: Any) -> None:
    raised: list[Exception] = []

    def write(*args: Any) -> None:
        try:
            args[-1].update_state(lambda draft: draft.items.append("waiting"))
        except ReadOnlyStateError as exc:
            raised.append(exc)

    gated = define_tool("add", "Add.", Item, add_item, require_approval=True)
    agent = define_agent(unique("wait-write"), tools=[gated], state_schema=Basket,
                         hooks=AgentHooks(on_agent_suspended=write, on_agent_resumed=write))
    use_model(executor, calls(call("g1", "add", {"name": "pear"})), text("done"))
    handle = executor.execute(agent, "go")
    wait_for(lambda: executor.list_pending(handle.session_id), timeout=RESULT_TIMEOUT, what="the gated call")
    executor.submit_tool_result(handle.session_id, ApprovalResponse(tool_call_id="g1", approved=True))
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    assert len(raised) == 2 and all("before it commits" in str(exc) for exc in raised)
    assert executor.get_session(handle.session_id).state == {"items": ["pear"]}
