"""Sub-agents on a real Postgres: dispatch, results, parallelism, nesting, isolation.

A parent calls ``subagent__<name>`` tools; each call runs the child as a DBOS child
workflow in a session ``<parent>-sub-<call id>`` and the child's output becomes the
tool's result. Parent and children share one scripted model: :func:`family_model`
answers each agent from its own script, picked by the system prompt (every agent here
has its own) and checked against the tools the agent is offered.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any

from pydantic import BaseModel
from runtime_testkit import (
    RESULT_TIMEOUT,
    agent,
    assert_paired,
    call,
    calls,
    cli,
    events,
    family_model,
    finish,
    last_result,
    result_for,
    rows,
    sub,
    text,
    tool_results,
    unique,
    user_input,
)

from helix_dbos import (
    ToolContext,
    create_sub_agent_tool,
    define_tool,
)
from helix_dbos.types import (
    Message,
)


class Work(BaseModel):
    label: str


# --- one child -----------------------------------------------------------------------------


def test_one_child_returns_its_output_as_the_tool_result_and_keeps_its_own_session(executor):
    child = agent(unique("writer"))
    parent = agent(unique("lead"), tools=[create_sub_agent_tool(child)])
    tool_name = f"subagent__{child.name}"
    mock = family_model(executor, {
        parent: [
            calls(call("w1", tool_name, {"input": "write a haiku"})),
            lambda m: text(f"parent relays: {json.loads(last_result(m).content)}"),
        ],
        child: [lambda m: text(f"haiku about '{user_input(m)}'")],
    })

    handle = executor.execute(parent, "delegate please")
    result = handle.result(timeout=RESULT_TIMEOUT)

    assert (result.status, result.step_count) == ("completed", 2)
    assert result.output == "parent relays: haiku about 'write a haiku'"
    parent_session = executor.get_session(handle.session_id)
    assert [m.role for m in parent_session.messages] == ["user", "assistant", "tool", "assistant"]
    assert_paired(parent_session.messages)
    delegated = result_for(parent_session.messages, "w1")
    assert (delegated.tool_name, delegated.is_error) == (tool_name, False)
    assert json.loads(delegated.content) == "haiku about 'write a haiku'"  # JSON, like any tool result

    child_id = sub(handle.session_id, "w1")
    child_session = executor.get_session(child_id)
    assert (child_session.agent_name, child_session.status, child_session.output) == (
        child.name, "completed", "haiku about 'write a haiku'"
    )
    assert (child_session.parent_session_id, child_session.parent_tool_call_id, child_session.root_session_id) == (
        handle.session_id, "w1", handle.session_id
    )
    assert parent_session.parent_session_id is None and parent_session.root_session_id == handle.session_id
    # The child's own transcript: its input as the user message, its answer; none of the parent's.
    assert [(m.role, getattr(m, "content", None)) for m in child_session.messages] == [
        ("user", "write a haiku"), ("assistant", "haiku about 'write a haiku'")
    ]
    assert child_session.state == {} and child_session.step_count == 1
    assert [(r.run, r.status) for r in executor.list_runs(child_id)] == [(1, "completed")]
    # The child ran its one model call, with its own transcript, in between the parent's two.
    assert [i.messages[0].content for i in mock.inputs] == [
        f"You are {parent.name}.", f"You are {child.name}.", f"You are {parent.name}."
    ]
    # The parent is offered the sub-agent as a tool with the default input schema.
    spec = next(t for t in mock.inputs[0].tools if t.name == tool_name)
    assert spec.parameters["required"] == ["input"]
    assert [r["id"] for r in rows(executor, "SELECT id FROM helix.sessions WHERE root_session_num = helix.session_num(%(r)s) ORDER BY id",
                                  r=handle.session_id)] == sorted([handle.session_id, child_id])


# --- several children ------------------------------------------------------------------------


def test_parallel_children_one_failing_siblings_finish_and_results_stay_in_call_order(executor):
    met = threading.Barrier(2, timeout=10)  # c1 and c3 must be inside their tools at once
    finished: list[str] = []

    def work(args: Work, ctx: ToolContext) -> dict[str, Any]:
        met.wait()
        if args.label == "one":
            time.sleep(0.2)  # c1 ends last; its result still comes first
        finished.append(args.label)
        return {"worked": args.label}

    child = agent(unique("worker"), tools=[define_tool("work", "Do the work.", Work, work)])
    parent = agent(unique("boss"), tools=[create_sub_agent_tool(child)])
    tool_name = f"subagent__{child.name}"

    def child_first(messages: list[Message]) -> dict[str, Any]:
        label = user_input(messages)
        if label == "two":
            return {"type": "error", "error": "child two broke", "should_stop": True, "stop_reason": "error"}
        return calls(call(f"t-{label}", "work", {"label": label}))

    family_model(executor, {
        parent: [
            calls(*(call(f"c{i}", tool_name, {"input": label}) for i, label in ((1, "one"), (2, "two"), (3, "three")))),
            text("parent done"),
        ],
        child: [child_first, lambda m: text(f"done {user_input(m)}: {last_result(m).content}")],
    })

    handle = executor.execute(parent, "fan out")
    result = handle.result(timeout=RESULT_TIMEOUT)

    assert (result.status, result.output) == ("completed", "parent done")
    assert finished == ["three", "one"], "the two healthy children must have run at the same time"
    messages = executor.get_session(handle.session_id).messages
    assert_paired(messages)
    results = tool_results(messages)
    assert [r.tool_call_id for r in results] == ["c1", "c2", "c3"]
    assert [r.is_error for r in results] == [False, True, False]
    assert json.loads(results[0].content) == 'done one: {"worked":"one"}'
    assert json.loads(results[2].content) == 'done three: {"worked":"three"}'
    assert "failed" in results[1].content and "child two broke" in results[1].content
    statuses = {r["id"]: r["status"] for r in rows(
        executor, "SELECT id, status FROM helix.sessions WHERE parent_session_num = helix.session_num(%(p)s)", p=handle.session_id)}
    assert statuses == {
        sub(handle.session_id, "c1"): "completed",
        sub(handle.session_id, "c2"): "failed",
        sub(handle.session_id, "c3"): "completed",
    }
    finishes = [e["data"] for e in events(executor, handle.session_id) if e["type"] == "subagent_finish"]
    assert [(f["tool_call_id"], f["status"]) for f in finishes] == [("c1", "completed"), ("c2", "failed"), ("c3", "completed")]


def test_max_tool_concurrency_one_runs_children_one_after_another(executor):
    spans: list[tuple[str, float, float]] = []
    lock = threading.Lock()

    def work(args: Work, ctx: ToolContext) -> dict[str, Any]:
        start = time.monotonic()
        time.sleep(0.15)
        with lock:
            spans.append((args.label, start, time.monotonic()))
        return {"worked": args.label}

    child = agent(unique("serial-worker"), tools=[define_tool("work", "Do the work.", Work, work)])
    parent = agent(unique("serial-boss"), tools=[create_sub_agent_tool(child)], max_tool_concurrency=1)
    tool_name = f"subagent__{child.name}"
    family_model(executor, {
        parent: [calls(*(call(f"c{i}", tool_name, {"input": f"job{i}"}) for i in (1, 2, 3))), text("all done")],
        child: [lambda m: calls(call("t1", "work", {"label": user_input(m)})), lambda m: text(user_input(m))],
    })

    handle = executor.execute(parent, "one at a time")
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"

    assert [label for label, _, _ in spans] == ["job1", "job2", "job3"]
    for (_, _, end), (label, start, _) in zip(spans, spans[1:]):
        assert start >= end, f"{label} started before the previous child's tool ended: {spans}"
    messages = executor.get_session(handle.session_id).messages
    assert [json.loads(r.content) for r in tool_results(messages)] == ["job1", "job2", "job3"]
    # Each child was started only after the previous one finished.
    kinds = [(e["type"], e["data"]["tool_call_id"]) for e in events(executor, handle.session_id)
             if e["type"] in ("subagent_start", "subagent_finish")]
    assert kinds == [(kind, f"c{i}") for i in (1, 2, 3) for kind in ("subagent_start", "subagent_finish")]


# --- nesting ---------------------------------------------------------------------------------


def test_three_levels_outputs_flow_back_up_and_every_level_records_the_root(executor):
    grandchild = agent(unique("leaf"))
    child = agent(unique("middle"), tools=[create_sub_agent_tool(grandchild)])
    parent = agent(unique("top"), tools=[create_sub_agent_tool(child)])
    family_model(executor, {
        parent: [
            calls(call("m1", f"subagent__{child.name}", {"input": "ask the leaf"})),
            lambda m: text(f"top got [{json.loads(last_result(m).content)}]"),
        ],
        child: [
            calls(call("g1", f"subagent__{grandchild.name}", {"input": "deep question"})),
            lambda m: text(f"middle got [{json.loads(last_result(m).content)}]"),
        ],
        grandchild: [lambda m: text(f"leaf answers '{user_input(m)}'")],
    })

    handle = executor.execute(parent, "go deep")
    result = handle.result(timeout=RESULT_TIMEOUT)

    assert result.status == "completed"
    assert result.output == "top got [middle got [leaf answers 'deep question']]"
    root = handle.session_id
    middle_id = sub(root, "m1")
    leaf_id = sub(middle_id, "g1")
    lineage = {r["id"]: (r["agent_name"], r["status"], r["parent_session_id"], r["root_session_id"]) for r in rows(
        executor, "SELECT s.id, s.agent_name, s.status, p.id AS parent_session_id, r.id AS root_session_id"
        " FROM helix.sessions s JOIN helix.sessions r ON r.num = s.root_session_num"
        " LEFT JOIN helix.sessions p ON p.num = s.parent_session_num WHERE r.id = %(r)s", r=root)}
    assert lineage == {
        root: (parent.name, "completed", None, root),
        middle_id: (child.name, "completed", root, root),
        leaf_id: (grandchild.name, "completed", middle_id, root),
    }
    assert executor.get_session(leaf_id).output == "leaf answers 'deep question'"
    for session_id in (root, middle_id):
        assert_paired(executor.get_session(session_id).messages)
    # The leaf's events reach the root nested inside the middle's tagged events.
    tagged = [e["data"] for e in events(executor, root) if e["type"] == "subagent_event"]
    assert {t["session_id"] for t in tagged} == {middle_id}
    nested = [t["event"]["data"] for t in tagged if t["event"]["type"] == "subagent_event"]
    assert nested and {n["session_id"] for n in nested} == {leaf_id}

    # `helix-dbos show` displays the session tree, the leaf indented under the middle.
    shown = json.loads(cli(executor, "show", root, "--json").stdout)
    assert [c["session_id"] for c in shown["children"]] == [middle_id, leaf_id]
    lines = cli(executor, "show", root).stdout.splitlines()
    tree = lines[lines.index("sub-agent and companion sessions") + 2:]
    assert tree[0].startswith(f"  {middle_id} ") and tree[1].startswith(f"    {leaf_id} "), tree


# --- isolation and streams -----------------------------------------------------------------


class ParentState(BaseModel):
    count: int = 0


class ChildState(BaseModel):
    items: list[str] = []


class Note(BaseModel):
    text: str


def test_a_child_has_its_own_state_and_its_events_are_tagged_into_the_parent_stream(executor):
    seen_by_child: list[Any] = []

    def note(args: Note, ctx: ToolContext) -> dict[str, Any]:
        seen_by_child.append(ctx.get_state().dump())
        ctx.update_state(lambda draft: draft.items.append(args.text))
        return {"noted": args.text}

    def bump(_: BaseModel, ctx: ToolContext) -> dict[str, Any]:
        ctx.update_state(lambda draft: setattr(draft, "count", draft.count + 1))
        return {"count": "bumped"}

    class Empty(BaseModel):
        pass

    child = agent(unique("note-taker"), tools=[define_tool("note", "Take a note.", Note, note)], state_schema=ChildState)
    parent = agent(
        unique("counter"), tools=[define_tool("bump", "Count.", Empty, bump), create_sub_agent_tool(child)],
        state_schema=ParentState,
    )
    family_model(executor, {
        parent: [
            calls(call("b1", "bump"), call("s1", f"subagent__{child.name}", {"input": "remember this"})),
            text("parent finished"),
        ],
        child: [lambda m: calls(call("n1", "note", {"text": user_input(m)})), text("noted it")],
    })

    handle = executor.execute(parent, "count and delegate")
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    child_id = sub(handle.session_id, "s1")

    # Each session has its own state, of its own schema; the child never saw the parent's.
    assert executor.get_session(handle.session_id).state == {"count": 1}
    assert executor.get_session(child_id).state == {"items": ["remember this"]}
    assert seen_by_child == [{"items": []}]
    assert not rows(executor, "SELECT 1 FROM helix.state_patches WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %(p)s) AND patch::text LIKE '%%items%%'",
                    p=handle.session_id)
    # The child's tool calls live in the child's transcript only.
    parent_messages = executor.get_session(handle.session_id).messages
    assert [r.tool_name for r in tool_results(parent_messages)] == ["bump", f"subagent__{child.name}"]
    assert [r.tool_name for r in tool_results(executor.get_session(child_id).messages)] == ["note"]

    # The child's stream is its own ...
    own = list(executor.stream(child_id, follow=False))
    assert {e.session_id for e in own} == {child_id}
    own_types = [e.type for e in own]
    assert own_types[0] == "run_start" and own_types[-1] == "finish" and "tool_call" in own_types
    # ... and the parent's stream carries a tagged copy of it, between start and finish.
    parent_stream = list(executor.stream(handle.session_id, follow=False))
    assert {e.session_id for e in parent_stream} == {handle.session_id}
    types = [e.type for e in parent_stream]
    start, end = types.index("subagent_start"), types.index("subagent_finish")
    tagged = [e.data for e in parent_stream if e.type == "subagent_event"]
    assert all(start < i < end for i, t in enumerate(types) if t == "subagent_event")
    assert all(t["session_id"] == child_id for t in tagged)
    assert [(t["event"]["seq"], t["event"]["type"], t["event"]["data"]) for t in tagged] == [
        (e.seq, e.type, e.data) for e in own
    ]
    assert parent_stream[start].data == {"tool_call_id": "s1", "session_id": child_id, "agent": child.name}
    assert parent_stream[end].data == {"tool_call_id": "s1", "session_id": child_id, "status": "completed"}
    assert "note" not in {e.data.get("tool_name") for e in parent_stream if e.type == "tool_call"}


# --- dispatch failures -----------------------------------------------------------------------


def test_dispatch_failures_become_error_results_with_an_error_log_and_the_parent_goes_on(executor, caplog):
    child = agent(unique("helper"))
    parent = agent(unique("dispatcher"), tools=[create_sub_agent_tool(child)])
    tool_name = f"subagent__{child.name}"
    family_model(executor, {
        parent: [
            calls(
                call("ghost1", "subagent__no-such-agent", {"input": "hello?"}),
                call("bad1", tool_name, {"task": "input is missing"}),
                call("ok1", tool_name, {"input": "fine"}),
            ),
            lambda m: text("continued after " + ",".join(r.tool_call_id for r in tool_results(m) if r.is_error)),
        ],
        child: [text("helped")],
    })
    caplog.set_level(logging.ERROR, logger="helix_dbos")

    handle = executor.execute(parent, "dispatch three")
    result = handle.result(timeout=RESULT_TIMEOUT)

    assert (result.status, result.output) == ("completed", "continued after ghost1,bad1")
    messages = executor.get_session(handle.session_id).messages
    assert_paired(messages)
    ghost, bad, ok = tool_results(messages)
    assert (ghost.tool_call_id, ghost.tool_name, ghost.is_error) == ("ghost1", "subagent__no-such-agent", True)
    assert "Unknown sub-agent" in ghost.content and "no-such-agent" in ghost.content
    assert (bad.tool_call_id, bad.is_error) == ("bad1", True)
    assert "input" in bad.content and "required" in bad.content.lower()
    assert (ok.tool_call_id, ok.is_error, json.loads(ok.content)) == ("ok1", False, "helped")
    # Only the valid call got a child session.
    assert [r["id"] for r in rows(executor, "SELECT id FROM helix.sessions WHERE parent_session_num = helix.session_num(%(p)s)",
                                  p=handle.session_id)] == [sub(handle.session_id, "ok1")]
    failures = [r for r in caplog.records if r.name == "helix_dbos" and r.levelno == logging.ERROR
                and handle.session_id in r.getMessage()]
    assert len(failures) == 2, [r.getMessage() for r in failures]
    assert all("dispatch_failed" in r.getMessage() for r in failures)
    assert "ghost1" in failures[0].getMessage() and "bad1" in failures[1].getMessage()
    errors = [e["data"] for e in events(executor, handle.session_id) if e["type"] == "tool_result" and e["data"]["is_error"]]
    assert [e["tool_call_id"] for e in errors] == ["ghost1", "bad1"]


# --- structured output -----------------------------------------------------------------------


class Summary(BaseModel):
    title: str
    points: list[str]


class Verdict(BaseModel):
    chosen: str
    support: int


def test_a_child_finishing_with_structured_output_hands_the_parent_that_object(executor):
    child = agent(unique("summarizer"), output_schema=Summary)
    parent = agent(unique("judge"), tools=[create_sub_agent_tool(child)], output_schema=Verdict)

    def decide(messages: list[Message]) -> dict[str, Any]:
        summary = json.loads(last_result(messages).content)
        return finish("v1", chosen=summary["title"], support=len(summary["points"]))

    family_model(executor, {
        parent: [calls(call("s1", f"subagent__{child.name}", {"input": "summarize"})), decide],
        child: [text("let me think"), finish("f1", title="DBOS", points=["durable", "postgres"])],
    })

    handle = executor.execute(parent, "judge it")
    result = handle.result(timeout=RESULT_TIMEOUT)

    assert (result.status, result.output) == ("completed", {"chosen": "DBOS", "support": 2})
    delegated = result_for(executor.get_session(handle.session_id).messages, "s1")
    assert not delegated.is_error
    assert json.loads(delegated.content) == {"title": "DBOS", "points": ["durable", "postgres"]}
    child_session = executor.get_session(sub(handle.session_id, "s1"))
    assert (child_session.status, child_session.output, child_session.step_count) == (
        "completed", {"title": "DBOS", "points": ["durable", "postgres"]}, 2
    )
    assert_paired(child_session.messages)
