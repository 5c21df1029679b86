"""Parallel tool calls in one step: capped parallel execution, their state
writes merged in call order, hooks in tool execution order.

Concurrency is shown with events, not timing: a tool that waits for its sibling to
start can only see it start if both run at once.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import jsonpatch
from pydantic import BaseModel

from helix_dbos import ToolContext, define_agent, define_tool
from runtime_testkit import (
    RESULT_TIMEOUT,
    assert_paired,
    call,
    calls,
    events,
    result_for,
    text,
    tool_results,
    unique,
    use_model,
    wait_for,
)

WAIT = 5.0
"""How long a tool waits for its sibling before giving up (a failure, never a hang)."""


class Named(BaseModel):
    name: str


class Notes(BaseModel):
    notes: list[str] = []
    x: int = 0


def run(executor: Any, agent: Any) -> tuple[Any, Any]:
    handle = executor.execute(agent, "go")
    return handle, handle.result(timeout=RESULT_TIMEOUT)


def test_two_tools_in_one_step_run_concurrently(executor):
    started = {"a": threading.Event(), "b": threading.Event()}
    saw_sibling: dict[str, bool] = {}

    def meet(i: Named, ctx: ToolContext) -> dict:
        me, other = i.name, "b" if i.name == "a" else "a"
        started[me].set()
        saw_sibling[me] = started[other].wait(WAIT)  # only true if the other runs meanwhile
        return {"me": me}

    agent = define_agent(unique("par"), tools=[define_tool("meet", "Meet.", Named, meet)])
    use_model(executor, calls(call("a1", "meet", {"name": "a"}), call("b1", "meet", {"name": "b"})), text("done"))
    handle, result = run(executor, agent)
    assert result.status == "completed"
    assert saw_sibling == {"a": True, "b": True}
    assert result.step_count == 2  # both calls were one agent step


def test_async_tools_in_one_step_run_concurrently(executor):
    import asyncio

    seen: dict[str, bool] = {}
    both = {"count": 0}
    arrived: asyncio.Event | None = None

    async def meet(i: Named, ctx: ToolContext) -> dict:
        nonlocal arrived
        if arrived is None:
            arrived = asyncio.Event()
        both["count"] += 1
        if both["count"] == 2:
            arrived.set()
        try:
            await asyncio.wait_for(arrived.wait(), WAIT)
            seen[i.name] = True
        except asyncio.TimeoutError:
            seen[i.name] = False
        return {}

    agent = define_agent(unique("par-async"), tools=[define_tool("meet", "Meet.", Named, meet)])
    use_model(executor, calls(call("a1", "meet", {"name": "a"}), call("b1", "meet", {"name": "b"})), text("done"))
    _, result = run(executor, agent)
    assert result.status == "completed"
    assert seen == {"a": True, "b": True}


def test_max_tool_concurrency_one_never_overlaps(executor):
    lock = threading.Lock()
    active = {"now": 0, "max": 0}
    started = {"a": threading.Event(), "b": threading.Event(), "c": threading.Event()}
    order: list[str] = []

    def solo(i: Named, ctx: ToolContext) -> dict:
        with lock:
            active["now"] += 1
            active["max"] = max(active["max"], active["now"])
            order.append(i.name)
        started[i.name].set()
        # Under the cap no sibling can start while this call runs: waiting for one
        # times out (briefly) instead of meeting it.
        met = any(e.wait(0.15) for name, e in started.items() if name != i.name and not e.is_set())
        with lock:
            active["now"] -= 1
        return {"met": met}

    agent = define_agent(
        unique("par-cap"), tools=[define_tool("solo", "Solo.", Named, solo)], max_tool_concurrency=1
    )
    use_model(
        executor,
        calls(*(call(f"{n}1", "solo", {"name": n}) for n in "abc")),
        text("done"),
    )
    handle, result = run(executor, agent)
    assert result.status == "completed"
    assert active["max"] == 1
    assert sorted(order) == ["a", "b", "c"]
    messages = executor.get_session(handle.session_id).messages
    assert [json.loads(m.content) for m in tool_results(messages)] == [{"met": False}] * 3


def test_results_are_in_call_order_when_the_second_call_finishes_first(executor):
    b_done = threading.Event()
    finished: list[str] = []

    def fast_result_streamed(session_id: str) -> bool:
        return any(e["type"] == "tool_result" for e in events(executor, session_id))

    def race(i: Named, ctx: ToolContext) -> dict:
        if i.name == "slow":
            assert b_done.wait(WAIT), "the fast call never finished"
            wait_for(lambda: fast_result_streamed(ctx.session_id), WAIT, "the fast call's streamed result")
        finished.append(i.name)
        if i.name == "fast":
            b_done.set()
        return {"name": i.name}

    agent = define_agent(unique("par-order"), tools=[define_tool("race", "Race.", Named, race)])
    mock = use_model(
        executor,
        calls(call("c1", "race", {"name": "slow"}), call("c2", "race", {"name": "fast"})),
        text("done"),
    )
    handle, result = run(executor, agent)
    assert result.status == "completed"
    assert finished == ["fast", "slow"]
    messages = executor.get_session(handle.session_id).messages
    assert [(m.tool_call_id, json.loads(m.content)) for m in tool_results(messages)] == [
        ("c1", {"name": "slow"}),
        ("c2", {"name": "fast"}),
    ]
    assert_paired(messages)
    # The stream has each result when its tool ended: the fast one first (the
    # slow one ends only once the fast one's result is in the stream).
    stream = [e["data"]["tool_call_id"] for e in events(executor, handle.session_id) if e["type"] == "tool_result"]
    assert stream == ["c2", "c1"]
    # ... and the model saw them in that order too.
    seen = [m.tool_call_id for m in mock.get_last_input().messages if m.role == "tool"]
    assert seen == ["c1", "c2"]


def test_each_parallel_tool_sees_the_committed_pre_step_state(executor):
    written = threading.Event()

    def writer(i: Named, ctx: ToolContext) -> dict:
        def change(draft: Any) -> None:
            draft.notes.append(i.name)
            draft.x = 99

        ctx.update_state(change)
        written.set()
        return {"own_view": ctx.get_state().dump()}

    def reader(i: Named, ctx: ToolContext) -> dict:
        assert written.wait(WAIT), "the writer never wrote"
        return {"view": ctx.get_state().dump()}

    agent = define_agent(
        unique("par-state"),
        tools=[define_tool("writer", "W.", Named, writer), define_tool("reader", "R.", Named, reader)],
        state_schema=Notes,
    )
    use_model(
        executor,
        calls(call("w0", "writer", {"name": "first"})),
        calls(call("w1", "writer", {"name": "second"}), call("r1", "reader", {"name": "r"})),
        text("done"),
    )
    handle, result = run(executor, agent)
    assert result.status == "completed"
    messages = executor.get_session(handle.session_id).messages
    # The reader ran after its sibling wrote, yet saw the state committed by step 1 only.
    assert json.loads(result_for(messages, "r1").content) == {"view": {"notes": ["first"], "x": 99}}
    assert json.loads(result_for(messages, "w1").content) == {"own_view": {"notes": ["first", "second"], "x": 99}}
    assert executor.get_session(handle.session_id).state == {"notes": ["first", "second"], "x": 99}


class Put(BaseModel):
    note: str
    x: int
    wait_for_sibling: bool = False


def test_appends_compose_and_replaces_are_last_writer_wins_in_call_order(executor):
    second_done = threading.Event()

    def put(i: Put, ctx: ToolContext) -> dict:
        if i.wait_for_sibling:
            assert second_done.wait(WAIT), "the sibling never finished"

        def change(draft: Any) -> None:
            draft.notes.append(i.note)
            draft.x = i.x

        ctx.update_state(change)
        if not i.wait_for_sibling:
            second_done.set()
        return {}

    agent = define_agent(unique("par-merge"), tools=[define_tool("put", "Put.", Put, put)], state_schema=Notes)
    use_model(
        executor,
        # The first call finishes LAST; the merge still follows call order.
        calls(call("p1", "put", {"note": "a", "x": 1, "wait_for_sibling": True}), call("p2", "put", {"note": "b", "x": 2})),
        text("done"),
    )
    handle, result = run(executor, agent)
    assert result.status == "completed"
    session = executor.get_session(handle.session_id)
    assert session.state == {"notes": ["a", "b"], "x": 2}
    [patch_event] = [e for e in events(executor, handle.session_id) if e["type"] == "state_patch"]
    patches = patch_event["data"]["patches"]
    assert [p for p in patches if p["path"] == "/notes/-"] == [
        {"op": "add", "path": "/notes/-", "value": "a"},
        {"op": "add", "path": "/notes/-", "value": "b"},
    ]
    assert [p for p in patches if p["path"] == "/x"] == [{"op": "replace", "path": "/x", "value": 2}]
    assert jsonpatch.apply_patch({"notes": [], "x": 0}, patches) == session.state


def test_finish_with_tool_runs_after_the_regular_tools_and_sees_their_writes(executor):
    order: list[str] = []

    def put(i: Put, ctx: ToolContext) -> dict:
        order.append(f"put:{i.note}")

        def change(draft: Any) -> None:
            draft.notes.append(i.note)
            draft.x = i.x

        ctx.update_state(change)
        return {}

    def submit(i: Named, ctx: ToolContext) -> dict:
        order.append("submit")
        seen = ctx.get_state().dump()
        ctx.update_state(lambda draft: draft.notes.append("submitted"))
        return {"seen": seen}

    agent = define_agent(
        unique("par-phase2"),
        tools=[define_tool("put", "Put.", Put, put), define_tool("submit", "Submit.", Named, submit, finish_with=True)],
        state_schema=Notes,
    )
    use_model(
        executor,
        # submit comes FIRST in the call list, but runs in phase 2.
        calls(call("s1", "submit", {"name": "n"}), call("p1", "put", {"note": "a", "x": 5}), call("p2", "put", {"note": "b", "x": 6})),
    )
    handle, result = run(executor, agent)
    assert result.status == "completed"
    assert result.output == {"seen": {"notes": ["a", "b"], "x": 6}}
    assert order[-1] == "submit" and sorted(order[:2]) == ["put:a", "put:b"]
    session = executor.get_session(handle.session_id)
    assert session.state == {"notes": ["a", "b", "submitted"], "x": 6}
    assert [m.tool_call_id for m in tool_results(session.messages)] == ["s1", "p1", "p2"]
    assert_paired(session.messages)
