"""Usage: one row of ``helix.session_usage`` per LLM call and per tool call, summed by
``get_usage``; read from each committed step's ``step_finish`` and ``tool_result`` events,
which hold them, so no table of its own is written."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from helix_dbos import MockLLMAdapter, Usage, define_agent, tool
from helix_dbos.llm.mock import to_step_result
from helix_dbos.types import MessageListAdapter
from runtime_testkit import RESULT_TIMEOUT, call, calls, events, finish, text, unique, usage_rows, use_model


@tool
def lookup(key: str) -> dict:
    """Look a key up."""
    return {"key": key}


@tool
def broken(key: str) -> dict:
    """Always fails."""
    raise RuntimeError("broken")


def run(executor: Any, agent: Any, message: str = "go", session_id: str | None = None) -> Any:
    handle = executor.execute(agent, message, session_id=session_id)
    handle.result(timeout=RESULT_TIMEOUT)
    return handle


def test_get_usage_sums_the_models_deterministic_usage_and_counts_tools(executor):
    agent = define_agent(unique("usage"), tools=[lookup, broken])
    mock = use_model(
        executor,
        calls(call("c1", "lookup", {"key": "a"}), call("c2", "lookup", {"key": "b"})),
        calls(call("c3", "broken", {"key": "c"}), call("c4", "nope", {})),  # unknown tools never run
        text("done"),
    )
    handle = run(executor, agent)
    sid = handle.session_id

    # MockLLMAdapter's usage: a quarter of the JSON length of the input and of the answer.
    expected = []
    for llm_input in mock.inputs:
        answer = to_step_result(mock.responder(llm_input.messages, llm_input.tools))
        i = len(MessageListAdapter.dump_json(llm_input.messages)) // 4
        o = len(answer.model_dump_json()) // 4
        expected.append((i, o, i + o))
    assert len(expected) == 3 and all(t > 0 for _, _, t in expected)

    table = usage_rows(executor, sid)
    assert [(r["step"], r["source"], r["name"], r["success"]) for r in table] == [
        (1, "llm", "mock", True), (1, "tool", "lookup", True), (1, "tool", "lookup", True),
        (2, "llm", "mock", True), (2, "tool", "broken", False),
        (3, "llm", "mock", True),
    ]
    assert [(r["input_tokens"], r["output_tokens"], r["total_tokens"]) for r in table if r["source"] == "llm"] == expected

    usage = executor.get_usage(sid)
    assert usage.llm_calls == 3
    assert usage.tool_calls == 3
    assert usage.input_tokens == sum(i for i, _, _ in expected)
    assert usage.output_tokens == sum(o for _, o, _ in expected)
    assert usage.total_tokens == sum(t for _, _, t in expected)
    assert usage.cost_usd is None
    assert usage.by_name["llm:mock"]["calls"] == 3
    assert usage.by_name["tool:lookup"]["calls"] == 2
    assert usage.by_name["tool:broken"]["calls"] == 1
    assert "tool:nope" not in usage.by_name

    # each step's step_finish holds the model's usage and each tool_result its tool's time,
    # and no row stores them again
    stream = events(executor, sid)
    finishes = [e["data"]["usage"] for e in stream if e["type"] == "step_finish"]
    assert [(u["model"], u.get("success"), u["total_tokens"], "tools" in u) for u in finishes] == [
        ("mock", None, expected[0][2], False),  # success is said when false only
        ("mock", None, expected[1][2], False),
        ("mock", None, expected[2][2], False),
    ]
    results = sorted((e["step"], e["data"]["tool_name"], e["data"]["is_error"], e["data"]["ms"] is not None)
                     for e in stream if e["type"] == "tool_result")
    assert results == [  # an unknown tool never ran: its result has no time
        (1, "lookup", False, True), (1, "lookup", False, True), (2, "broken", True, True), (2, "nope", True, False),
    ]
    assert all(e["data"]["ms"] > 0 for e in stream if e["type"] == "tool_result" and e["data"]["ms"] is not None)


def test_get_usage_sums_reported_usage_and_cost_across_runs(executor):
    agent = define_agent(unique("usage-runs"), tools=[lookup])
    mock = MockLLMAdapter()
    mock.add_response(calls(call("c1", "lookup", {"key": "a"})), usage=Usage(input_tokens=100, output_tokens=10, total_tokens=110, cost_usd=0.01))
    mock.add_response(text("one"), usage=Usage(input_tokens=200, output_tokens=20, total_tokens=220, cost_usd=0.02))
    mock.add_response(text("two"), usage=Usage(input_tokens=300, output_tokens=30, total_tokens=330, cost_usd=0.03))
    executor.llm = mock
    handle = run(executor, agent)
    run(executor, agent, "again", session_id=handle.session_id)
    usage = executor.get_usage(handle.session_id)
    assert (usage.llm_calls, usage.tool_calls) == (3, 1)
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (600, 60, 660)
    assert abs(usage.cost_usd - 0.06) < 1e-9
    table = usage_rows(executor, handle.session_id)
    assert [(r["run"], r["step"], r["source"]) for r in table] == [
        (1, 1, "llm"), (1, 1, "tool"), (1, 2, "llm"), (2, 3, "llm"),
    ]


def test_finish_calls_and_failed_llm_calls_are_counted_correctly(executor):
    class Out(BaseModel):
        v: int

    agent = define_agent(unique("usage-finish"), output_schema=Out)
    use_model(executor, finish("f1", v=1))
    handle = run(executor, agent)
    usage = executor.get_usage(handle.session_id)
    assert (usage.llm_calls, usage.tool_calls) == (1, 0)  # __finish__ is not a tool run

    failing = define_agent(unique("usage-error"))
    use_model(executor, {"type": "error", "error": "down"})
    handle = run(executor, failing)
    [row] = usage_rows(executor, handle.session_id)
    assert (row["source"], row["success"]) == ("llm", False)
    assert executor.get_usage(handle.session_id).llm_calls == 1
