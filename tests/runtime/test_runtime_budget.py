"""The step budget and how a step ends a run, on a real Postgres.

``max_steps`` and every ``stop_when`` condition see one scope: the current run (one
turn of a session, or the run a resume starts), never the session's running total.
An error step stops the run only when it says ``should_stop``; otherwise the model is
asked again. Where several reasons to stop meet in one step, this order
decides: structured output, error with ``should_stop``, text, then ``max_steps`` and
``stop_when``.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from helix_dbos import MockLLMAdapter, Usage, define_agent, step_count_is, tool, total_tokens_exceed
from helix_dbos.orchestration import StopInfo
from runtime_testkit import (
    RESULT_TIMEOUT,
    Gate,
    call,
    calls,
    finish,
    text,
    tool_results,
    unique,
    usage_rows,
    use_model,
)


class Verdict(BaseModel):
    verdict: str


@tool
def echo(value: str) -> dict:
    """Echo the value."""
    return {"echoed": value}


def echo_step(call_id: str) -> dict[str, Any]:
    return calls(call(call_id, "echo", {"value": call_id}))


def turn(executor: Any, agent: Any, message: str, session_id: str | None = None) -> tuple[Any, Any]:
    handle = executor.execute(agent, message, session_id=session_id)
    return handle, handle.result(timeout=RESULT_TIMEOUT)


def runs(executor: Any, session_id: str) -> list[tuple[int, str, str | None, int, int]]:
    return [(r.run, r.status, r.stop_reason, r.start_step, r.end_step) for r in executor.list_runs(session_id)]


# --- the budget is per run ---------------------------------------------------------------------


def test_max_steps_is_a_budget_per_turn_not_per_session(executor):
    agent = define_agent(unique("budget-turns"), tools=[echo], max_steps=3)
    use_model(
        executor,
        echo_step("a1"), echo_step("a2"), text("first answer"),                      # turn 1: 3 steps
        echo_step("b1"), echo_step("b2"), text("second answer"),                     # turn 2: 3 steps
        echo_step("c1"), echo_step("c2"), echo_step("c3"), echo_step("never"),     # turn 3: cut at 3
    )
    first, result = turn(executor, agent, "one")
    assert (result.status, result.output) == ("completed", "first answer")
    _, result = turn(executor, agent, "two", first.session_id)
    assert (result.status, result.output, result.step_count) == ("completed", "second answer", 6)
    _, result = turn(executor, agent, "three", first.session_id)
    assert (result.status, result.step_count) == ("completed", 9)
    assert runs(executor, first.session_id) == [
        (1, "completed", "end_turn", 0, 3),
        (2, "completed", "end_turn", 3, 6),
        (3, "completed", "max_steps", 6, 9),
    ]
    messages = executor.get_session(first.session_id).messages
    assert [m.tool_call_id for m in tool_results(messages)] == ["a1", "a2", "b1", "b2", "c1", "c2", "c3"]


def test_a_structured_output_agent_finishes_its_second_turn(executor):
    agent = define_agent(unique("budget-out"), tools=[echo], output_schema=Verdict, max_steps=2)
    use_model(
        executor,
        echo_step("a1"), finish("f1", verdict="first"),
        echo_step("b1"), finish("f2", verdict="second"),
    )
    first, result = turn(executor, agent, "judge")
    assert (result.status, result.output) == ("completed", {"verdict": "first"})
    _, result = turn(executor, agent, "judge again", first.session_id)
    assert (result.status, result.output, result.error, result.step_count) == (
        "completed", {"verdict": "second"}, None, 4
    )


def test_stop_conditions_see_the_runs_steps_count_and_usage(executor):
    seen: list[tuple[int, int, int]] = []

    def record(info: StopInfo) -> bool:
        seen.append((info.step_count, len(info.steps), info.usage.total_tokens))
        return False

    agent = define_agent(unique("budget-info"), tools=[echo], stop_when=[record, total_tokens_exceed(250)])
    mock = MockLLMAdapter()
    for step in (echo_step("a1"), echo_step("a2"), text("one"),
                 echo_step("b1"), echo_step("b2"), echo_step("b3"), echo_step("never")):
        mock.add_response(step, usage=Usage(input_tokens=80, output_tokens=20, total_tokens=100))
    executor.llm = mock
    first, result = turn(executor, agent, "one")
    assert result.output == "one"
    _, result = turn(executor, agent, "two", first.session_id)
    assert (result.status, result.step_count) == ("completed", 6)  # 300 tokens in turn 2 > 250
    assert mock.pending == 1
    assert seen == [(1, 1, 100), (2, 2, 200), (1, 1, 100), (2, 2, 200), (3, 3, 300)]
    assert runs(executor, first.session_id)[1] == (2, "completed", "max_steps", 3, 6)


def test_step_count_is_counts_the_steps_of_the_current_turn(executor):
    agent = define_agent(unique("budget-count"), tools=[echo], stop_when=step_count_is(2))
    use_model(executor, echo_step("a1"), text("one"), echo_step("b1"), echo_step("b2"), echo_step("never"))
    first, _ = turn(executor, agent, "one")
    _, result = turn(executor, agent, "two", first.session_id)
    assert (result.status, result.step_count) == ("completed", 4)
    assert runs(executor, first.session_id)[1] == (2, "completed", "max_steps", 2, 4)


def test_a_resume_after_an_interrupt_is_a_new_run_with_a_fresh_budget(executor):
    gate = Gate()
    agent = define_agent(unique("budget-resume"), tools=[echo, gate.tool()], max_steps=3)
    use_model(
        executor,
        echo_step("a1"), calls(call("g1", "wait_here")),                 # run 1: interrupted after 2 steps
        echo_step("b1"), echo_step("b2"), text("resumed"),               # run 2: 3 steps of its own
    )
    handle = executor.execute(agent, "go")
    gate.wait_entered()
    assert executor.interrupt(handle.session_id) is True
    gate.open()
    assert handle.result(timeout=RESULT_TIMEOUT).status == "interrupted"
    result = executor.resume(agent, handle.session_id).result(timeout=RESULT_TIMEOUT)
    assert (result.status, result.output, result.step_count) == ("completed", "resumed", 5)
    assert runs(executor, handle.session_id) == [(1, "interrupted", "interrupted", 0, 2), (2, "completed", "end_turn", 2, 5)]


# --- should_stop on error steps ------------------------------------------------------------------


def overloaded(should_stop: bool) -> dict[str, Any]:
    """An error step as the LLM adapters report one."""
    return {"type": "error", "error": "model overloaded", "should_stop": should_stop, "stop_reason": "error"}


def test_an_error_step_without_should_stop_lets_the_model_try_again(executor):
    agent = define_agent(unique("err-retry"), tools=[echo])
    mock = MockLLMAdapter()
    for step in (echo_step("a1"), overloaded(False), text("recovered")):
        mock.add_response(step)
    executor.llm = mock
    handle, result = turn(executor, agent, "go")
    assert (result.status, result.output, result.error, result.step_count) == ("completed", "recovered", None, 3)
    assert mock.inputs[1].messages == mock.inputs[2].messages  # asked again with the same transcript
    session = executor.get_session(handle.session_id)
    assert [m.role for m in session.messages] == ["user", "assistant", "tool", "assistant"]
    llm_rows = [r for r in usage_rows(executor, handle.session_id) if r["source"] == "llm"]
    assert [(r["step"], r["success"]) for r in llm_rows] == [(1, True), (2, False), (3, True)]


def test_an_error_step_without_should_stop_lets_an_output_schema_agent_finish(executor):
    agent = define_agent(unique("err-retry-out"), output_schema=Verdict)
    mock = MockLLMAdapter()
    for step in (overloaded(False), finish("f1", verdict="fine")):
        mock.add_response(step)
    executor.llm = mock
    _, result = turn(executor, agent, "go")
    assert (result.status, result.output, result.step_count) == ("completed", {"verdict": "fine"}, 2)


def test_an_error_step_with_should_stop_ends_the_run(executor):
    agent = define_agent(unique("err-stop"), tools=[echo])
    mock = MockLLMAdapter()
    for step in (overloaded(True), text("never asked")):
        mock.add_response(step)
    executor.llm = mock
    handle, result = turn(executor, agent, "go")
    assert (result.status, result.error, result.stop_reason, result.step_count) == (
        "failed", "model overloaded", "error", 1
    )
    assert mock.pending == 1
    assert executor.get_session(handle.session_id).status == "failed"


def test_error_steps_without_should_stop_still_use_up_the_budget(executor):
    agent = define_agent(unique("err-budget"), max_steps=2)
    mock = MockLLMAdapter()
    for step in (overloaded(False), overloaded(False), text("never asked")):
        mock.add_response(step)
    executor.llm = mock
    handle, result = turn(executor, agent, "go")
    assert (result.status, result.error, result.stop_reason, result.step_count) == (
        "failed", "model overloaded", "max_steps", 2
    )
    assert mock.pending == 1
    assert [m.role for m in executor.get_session(handle.session_id).messages] == ["user"]


# --- the order of the reasons to stop where several meet in one step ------------------------------


@pytest.mark.parametrize(
    ("last_step", "expected"),
    [
        (text("the answer"), ("completed", "the answer", None, "end_turn")),                      # text > max_steps
        ({"type": "structured_output", "output": {"verdict": "ok"}},
         ("completed", {"verdict": "ok"}, None, "any")),                                        # structured > max_steps
        (overloaded(True), ("failed", None, "model overloaded", "error")),                      # error > max_steps
        (overloaded(False), ("failed", None, "model overloaded", "max_steps")),                 # non-terminal error
    ],
    ids=["text", "structured-output", "error-should-stop", "error-no-should-stop"],
)
def test_priority_order_when_the_last_step_of_the_budget_also_ends_the_run(executor, last_step, expected):
    agent = define_agent(unique("priority"), tools=[echo], max_steps=2)
    mock = MockLLMAdapter()
    for step in (echo_step("a1"), last_step):
        mock.add_response(step)
    executor.llm = mock
    _, result = turn(executor, agent, "go")
    status, output, error, stop_reason = expected
    assert (result.status, result.output, result.error) == (status, output, error)
    assert result.stop_reason != "max_steps" if stop_reason == "any" else result.stop_reason == stop_reason
    assert result.step_count == 2
