"""Results and metadata: the run's usage on its result and its ``finish``
event, ``stop_reason`` for a run completed through ``__finish__``, the step anatomy
``on_step_finish`` receives, and ``get_current_run`` on the executor and the admin API."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from helix_dbos import AgentHooks, SessionNotFoundError, StepInfo, Usage, define_agent, define_tool
from helix_dbos import admin
from runtime_testkit import RESULT_TIMEOUT, call, calls, events, finish, text, unique, usage_rows, use_model


class Item(BaseModel):
    name: str


def _ok(item: Item, ctx: Any) -> dict[str, str]:
    return {"found": item.name}


def _broken(item: Item, ctx: Any) -> dict[str, str]:
    raise RuntimeError(f"no {item.name}")


lookup = define_tool("lookup", "Look something up.", Item, _ok)
broken = define_tool("broken", "Always fails.", Item, _broken)


def llm_usage(executor: Any, session_id: str, run: int) -> Usage:
    """The sum of one run's committed ``llm`` usage rows."""
    total = Usage()
    for row in usage_rows(executor, session_id):
        if row["run"] == run and row["source"] == "llm":
            total = total + Usage(input_tokens=row["input_tokens"], output_tokens=row["output_tokens"],
                                  total_tokens=row["total_tokens"])
    return total


def tokens(usage: Any) -> tuple[int, int, int]:
    if isinstance(usage, dict):
        return usage["input_tokens"], usage["output_tokens"], usage["total_tokens"]
    return usage.input_tokens, usage.output_tokens, usage.total_tokens


def test_the_result_and_the_finish_event_carry_the_runs_usage(executor: Any) -> None:
    agent = define_agent(unique("usage"), system_prompt="x", tools=[lookup])
    use_model(executor, calls(call("l1", "lookup", {"name": "a"})), text("first"), text("second"))
    first = executor.execute(agent, "one").result(timeout=RESULT_TIMEOUT)
    sid = first.session_id
    second = executor.execute(agent, "two", session_id=sid).result(timeout=RESULT_TIMEOUT)

    assert (first.output, second.output) == ("first", "second")
    for run, result in ((1, first), (2, second)):
        expected = llm_usage(executor, sid, run)
        assert expected.total_tokens > 0
        assert tokens(result.usage) == tokens(expected)  # this run's steps only
        finish_event = [e for e in events(executor, sid) if e["type"] == "finish" and e["run"] == run]
        assert [tokens(e["data"]["usage"]) for e in finish_event] == [tokens(expected)]
    assert tokens(first.usage) != tokens(second.usage)  # run 1 had two model calls, run 2 one


def test_a_run_completed_through_finish_has_a_stop_reason(executor: Any) -> None:
    class Report(BaseModel):
        summary: str

    agent = define_agent(unique("finish-reason"), system_prompt="x", output_schema=Report)
    use_model(executor, finish("f1", summary="all done"))
    result = executor.execute(agent, "go").result(timeout=RESULT_TIMEOUT)
    sid = result.session_id

    assert (result.status, result.output, result.stop_reason) == ("completed", {"summary": "all done"}, "tool_use")
    assert executor.get_current_run(sid).stop_reason == "tool_use"
    assert [e["data"]["stop_reason"] for e in events(executor, sid) if e["type"] == "finish"] == ["tool_use"]


def test_on_step_finish_receives_the_step_anatomy(executor: Any) -> None:
    steps: list[StepInfo] = []
    agent = define_agent(unique("anatomy"), system_prompt="x", tools=[lookup, broken],
                         hooks=AgentHooks(on_step_finish=lambda step, ctx: steps.append(step)))
    use_model(
        executor,
        calls(call("l1", "lookup", {"name": "a"}), call("b1", "broken", {"name": "b"}), content="checking"),
        text("done", thinking={"content": "both answered"}, stop_reason="end_turn"),
        text("again", stop_reason="end_turn"),
    )
    first = executor.execute(agent, "go").result(timeout=RESULT_TIMEOUT)
    sid = first.session_id
    executor.execute(agent, "more", session_id=sid).result(timeout=RESULT_TIMEOUT)

    llm_rows = [r for r in usage_rows(executor, sid) if r["source"] == "llm"]
    assert [tokens(s.usage) for s in steps] == [
        (r["input_tokens"], r["output_tokens"], r["total_tokens"]) for r in llm_rows
    ]
    tool_step, text_step, next_turn = steps
    assert (tool_step.step, tool_step.step_type, tool_step.type) == (1, "initial", "tool_calls")
    assert (tool_step.text, tool_step.reasoning) == ("checking", None)
    assert [(c.id, c.name, c.arguments) for c in tool_step.tool_calls] == [
        ("l1", "lookup", {"name": "a"}), ("b1", "broken", {"name": "b"})
    ]
    assert [(r.tool_call_id, r.is_error) for r in tool_step.tool_results] == [("l1", False), ("b1", True)]
    assert "no b" in tool_step.tool_results[1].content
    assert [m.role for m in tool_step.messages] == ["assistant", "tool", "tool"]
    assert tool_step.messages[1:] == tool_step.tool_results

    assert (text_step.step, text_step.step_type, text_step.type) == (2, "tool_result", "text")
    assert (text_step.text, text_step.reasoning, text_step.stop_reason) == ("done", "both answered", "end_turn")
    assert (text_step.tool_calls, text_step.tool_results) == ([], [])
    assert [m.role for m in text_step.messages] == ["assistant"]

    # The next turn's first step is a run's first step again.
    assert (next_turn.step, next_turn.step_type, next_turn.text) == (3, "initial", "again")
    assert executor.get_session(sid).messages[-1] == next_turn.messages[-1]


def test_get_current_run_on_the_executor_and_the_admin_api(executor: Any) -> None:
    agent = define_agent(unique("current"), system_prompt="x")
    use_model(executor, text("one"), text("two"))
    sid = executor.execute(agent, "a").result(timeout=RESULT_TIMEOUT).session_id
    assert executor.get_current_run(sid).run == 1
    executor.execute(agent, "b", session_id=sid).result(timeout=RESULT_TIMEOUT)

    url = executor.database_url
    for current in (executor.get_current_run(sid), admin.get_current_run(url, sid)):
        assert current is not None
        assert (current.run, current.kind, current.status, current.stop_reason) == (2, "execute", "completed", "end_turn")
        assert current.workflow_id == f"helix:{sid}:run:2" and current.workflow_status == "SUCCESS"
    assert [r.run for r in admin.list_runs(url, sid)] == [1, 2]

    fork = admin.fork(url, sid, from_step=1)  # a session with history and no run yet
    assert executor.get_current_run(fork.session_id) is None
    assert admin.get_current_run(url, fork.session_id) is None
    with pytest.raises(SessionNotFoundError):
        executor.get_current_run(unique("nobody"))
    with pytest.raises(SessionNotFoundError):
        admin.get_current_run(url, unique("nobody"))
