"""The per-step loop against a real Postgres: how runs end.

Each test scripts the model, runs an agent to its end, and checks the result, the
session row and the committed transcript.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from helix_dbos import (
    MockLLMAdapter,
    ToolContext,
    Usage,
    define_agent,
    define_tool,
    has_tool_call,
    step_count_is,
    tool,
    total_tokens_exceed,
)
from helix_dbos.llm.base import PermanentLLMError
from helix_dbos.types import AssistantMessage, ToolResultMessage, UserMessage

from runtime_testkit import (
    RESULT_TIMEOUT,
    assert_paired,
    call,
    calls,
    finish,
    result_for,
    rows,
    text,
    tool_results,
    unique,
    use_model,
)


class Answer(BaseModel):
    answer: str
    confidence: float


class Echo(BaseModel):
    value: str


@tool
def echo(value: str) -> dict:
    """Echo the value."""
    return {"echoed": value}


@tool
def add(a: int, b: int) -> dict:
    """Add two numbers."""
    return {"sum": a + b}


def run(executor: Any, agent: Any, message: str = "go", session_id: str | None = None) -> tuple[Any, Any]:
    handle = executor.execute(agent, message, session_id=session_id)
    return handle, handle.result(timeout=RESULT_TIMEOUT)


# --- completing -------------------------------------------------------------------------


def test_text_answer_completes_with_the_text_as_output(executor):
    agent = define_agent(unique("text"), "Be brief.")
    mock = use_model(executor, text("Hello there!"))
    handle, result = run(executor, agent, "hi")
    assert (result.status, result.output, result.step_count) == ("completed", "Hello there!", 1)
    session = executor.get_session(handle.session_id)
    assert (session.status, session.output, session.step_count) == ("completed", "Hello there!", 1)
    assert [m.role for m in session.messages] == ["user", "assistant"]
    assert session.messages[1].content == "Hello there!"
    first = mock.get_last_input().messages
    assert first[0].role == "system" and first[0].content == "Be brief."
    assert first[1] == UserMessage(content="hi")


def test_tool_loop_runs_several_steps_and_feeds_results_back(executor):
    agent = define_agent(unique("loop"), tools=[add, echo])
    mock = use_model(
        executor,
        calls(call("c1", "add", {"a": 1, "b": 2})),
        calls(call("c2", "echo", {"value": "x"}), content="thinking"),
        text("sum is 3"),
    )
    handle, result = run(executor, agent)
    assert (result.status, result.output, result.step_count) == ("completed", "sum is 3", 3)
    messages = executor.get_session(handle.session_id).messages
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert json.loads(result_for(messages, "c1").content) == {"sum": 3}
    assert json.loads(result_for(messages, "c2").content) == {"echoed": "x"}
    assert messages[3].content == "thinking"
    assert_paired(messages)
    # The model saw every tool result before answering.
    seen = mock.get_last_input().messages
    assert [m.tool_call_id for m in seen if isinstance(m, ToolResultMessage)] == ["c1", "c2"]
    assert {t.name for t in mock.get_last_input().tools} == {"add", "echo"}


def test_finish_with_output_schema_validates_and_pairs_the_call(executor):
    agent = define_agent(unique("finish"), tools=[echo], output_schema=Answer)
    mock = use_model(executor, finish("f1", answer="42", confidence="0.9"))
    handle, result = run(executor, agent)
    assert result.status == "completed"
    assert result.output == {"answer": "42", "confidence": 0.9}  # validated: "0.9" became 0.9
    assert [t.name for t in mock.get_last_input().tools] == ["echo", "__finish__"]
    assert "`__finish__`" in mock.get_last_input().messages[0].content  # the output requirement
    session = executor.get_session(handle.session_id)
    assert session.output == {"answer": "42", "confidence": 0.9}
    last = session.messages[-1]
    assert isinstance(last, ToolResultMessage)
    assert (last.tool_call_id, last.tool_name, last.is_error) == ("f1", "__finish__", False)
    assert json.loads(last.content) == {"acknowledged": True}
    assert_paired(session.messages)


def test_invalid_finish_output_goes_back_to_the_model_then_a_valid_one_completes(executor):
    agent = define_agent(unique("badfinish"), output_schema=Answer)
    mock = use_model(
        executor,
        finish("f1", answer="42"),  # confidence missing
        finish("f2", answer="42", confidence=1.0),
    )
    handle, result = run(executor, agent)
    assert (result.status, result.output, result.step_count) == ("completed", {"answer": "42", "confidence": 1.0}, 2)
    messages = executor.get_session(handle.session_id).messages
    rejected = result_for(messages, "f1")
    assert rejected.is_error and "confidence" in rejected.content and "__finish__" in rejected.content
    # The second call saw the rejection.
    assert rejected in mock.get_last_input().messages
    assert json.loads(result_for(messages, "f2").content) == {"acknowledged": True}
    assert_paired(messages)


def test_finish_with_unparsable_arguments_goes_back_to_the_model(executor):
    agent = define_agent(unique("finish-json"), output_schema=Answer)
    use_model(
        executor,
        calls(call("f1", "__finish__", '{"answer": ', parse_error="Expecting value at char 11")),
        finish("f2", answer="ok", confidence=0.3),
    )
    handle, result = run(executor, agent)
    assert (result.status, result.step_count) == ("completed", 2)
    messages = executor.get_session(handle.session_id).messages
    rejected = result_for(messages, "f1")
    assert rejected.is_error and "Expecting value" in rejected.content
    assert_paired(messages)


def test_structured_output_step_completes_without_an_assistant_message(executor):
    agent = define_agent(unique("structured"), output_schema=Answer)
    use_model(executor, {"type": "structured_output", "output": {"answer": "yes", "confidence": 0.5}})
    handle, result = run(executor, agent)
    assert (result.status, result.output) == ("completed", {"answer": "yes", "confidence": 0.5})
    session = executor.get_session(handle.session_id)
    assert [m.role for m in session.messages] == ["user"]
    assert session.output == {"answer": "yes", "confidence": 0.5}


# --- finishWith tools -----------------------------------------------------------------------


class Submission(BaseModel):
    text: str


def test_finish_with_tool_completes_with_its_output_and_no_finish_tool_is_offered(executor):
    submit = define_tool("submit", "Submit.", Submission, lambda i, ctx: {"submitted": i.text}, finish_with=True)
    agent = define_agent(unique("fw"), tools=[echo, submit])
    mock = use_model(executor, calls(call("s1", "submit", {"text": "done"})))
    handle, result = run(executor, agent)
    assert (result.status, result.output) == ("completed", {"submitted": "done"})
    assert [t.name for t in mock.get_last_input().tools] == ["echo", "submit"]
    messages = executor.get_session(handle.session_id).messages
    assert json.loads(result_for(messages, "s1").content) == {"submitted": "done"}
    assert_paired(messages)


def test_first_of_two_finish_with_calls_wins(executor):
    ran: list[str] = []

    def approve(i: Submission, ctx: ToolContext) -> dict:
        ran.append("approve")
        return {"status": "approved", "text": i.text}

    def reject(i: Submission, ctx: ToolContext) -> dict:
        ran.append("reject")
        return {"status": "rejected", "text": i.text}

    tools = [
        define_tool("approve", "Approve.", Submission, approve, finish_with=True),
        define_tool("reject", "Reject.", Submission, reject, finish_with=True),
    ]
    agent = define_agent(unique("fw2"), tools=tools)
    use_model(executor, calls(call("r1", "reject", {"text": "no"}), call("a1", "approve", {"text": "yes"})))
    handle, result = run(executor, agent)
    assert (result.status, result.output) == ("completed", {"status": "rejected", "text": "no"})
    assert sorted(ran) == ["approve", "reject"]  # both ran (side effects), the first wins
    messages = executor.get_session(handle.session_id).messages
    assert [m.tool_call_id for m in tool_results(messages)] == ["r1", "a1"]
    assert_paired(messages)


class Processed(BaseModel):
    raw: str
    multiplier: int


class Final(BaseModel):
    result: str
    score: int


def test_finish_with_transform_maps_the_tool_output_to_the_agent_output(executor):
    process = define_tool(
        "process", "Process.", Processed,
        lambda i, ctx: {"raw": i.raw, "multiplier": i.multiplier},
        output_schema=Processed, finish_with=True,
        finish_with_transform=lambda out: {"result": out.raw.upper(), "score": out.multiplier},
    )
    agent = define_agent(unique("fwt"), tools=[process], output_schema=Final)
    use_model(executor, calls(call("p1", "process", {"raw": "hello", "multiplier": 5})))
    handle, result = run(executor, agent)
    assert (result.status, result.output) == ("completed", {"result": "HELLO", "score": 5})
    assert executor.get_session(handle.session_id).output == {"result": "HELLO", "score": 5}


def test_finish_with_transform_raising_fails_the_run(executor):
    def transform(out: Any) -> Any:
        raise ValueError("Invalid output")

    submit = define_tool("submit", "Submit.", Submission, lambda i, ctx: {"v": i.text}, finish_with=True,
                         finish_with_transform=transform)
    agent = define_agent(unique("fwraise"), tools=[submit])
    use_model(executor, calls(call("s1", "submit", {"text": "x"})))
    handle, result = run(executor, agent)
    assert result.status == "failed"
    assert "Invalid output" in result.error and "submit" in result.error
    session = executor.get_session(handle.session_id)
    assert (session.status, session.output) == ("failed", None)
    assert "Invalid output" in session.error
    assert_paired(session.messages)  # the submit call still has its result


def test_finish_with_execute_raising_goes_back_to_the_model_and_the_loop_continues(executor):
    def submit_fn(i: Submission, ctx: ToolContext) -> dict:
        if len(i.text) < 10:
            raise ValueError("Data too short. Please provide more detail.")
        return {"result": i.text}

    submit = define_tool("submit", "Submit.", Submission, submit_fn, finish_with=True)
    agent = define_agent(unique("fwretry"), tools=[submit])
    mock = use_model(
        executor,
        calls(call("s1", "submit", {"text": "Hi"})),
        calls(call("s2", "submit", {"text": "A longer and more detailed response"})),
    )
    handle, result = run(executor, agent)
    assert (result.status, result.output, result.step_count) == (
        "completed", {"result": "A longer and more detailed response"}, 2
    )
    messages = executor.get_session(handle.session_id).messages
    first = result_for(messages, "s1")
    assert first.is_error and "Data too short" in first.content
    assert first in mock.get_last_input().messages
    assert_paired(messages)


# --- failing and stopping -------------------------------------------------------------------


def test_error_step_from_a_permanent_llm_error_fails_the_run(executor):
    agent = define_agent(unique("llmerr"))
    mock = MockLLMAdapter()
    mock.add_error(PermanentLLMError("invalid api key"))
    executor.llm = mock
    handle, result = run(executor, agent)
    assert result.status == "failed"
    assert "invalid api key" in result.error
    session = executor.get_session(handle.session_id)
    assert session.status == "failed" and "invalid api key" in session.error
    assert [m.role for m in session.messages] == ["user"]
    [llm_row] = rows(executor, "SELECT success FROM helix.session_usage(%(s)s)", s=handle.session_id)
    assert llm_row["success"] is False


def test_error_step_result_from_the_model_fails_the_run(executor):
    agent = define_agent(unique("errstep"), tools=[echo])
    use_model(executor, calls(call("c1", "echo", {"value": "x"})), {"type": "error", "error": "provider exploded"})
    handle, result = run(executor, agent)
    assert (result.status, result.error, result.step_count) == ("failed", "provider exploded", 2)
    assert executor.get_session(handle.session_id).status == "failed"


def test_max_steps_stops_a_tool_loop(executor):
    agent = define_agent(unique("maxsteps"), tools=[echo], max_steps=2)
    use_model(
        executor,
        calls(call("c1", "echo", {"value": "1"}), content="one"),
        calls(call("c2", "echo", {"value": "2"}), content="two"),
        calls(call("c3", "echo", {"value": "3"})),  # never asked for
    )
    handle, result = run(executor, agent)
    assert (result.status, result.step_count, result.output) == ("completed", 2, "two")
    session = executor.get_session(handle.session_id)
    assert (session.status, session.stop_reason) == ("completed", "max_steps")
    assert [(r.status, r.stop_reason, r.end_step) for r in executor.list_runs(handle.session_id)] == [
        ("completed", "max_steps", 2)
    ]
    messages = executor.get_session(handle.session_id).messages
    assert [m.tool_call_id for m in tool_results(messages)] == ["c1", "c2"]
    assert_paired(messages)


def test_max_steps_fails_an_output_schema_agent_that_never_finished(executor):
    agent = define_agent(unique("maxsteps-out"), tools=[echo], output_schema=Answer, max_steps=1)
    use_model(executor, calls(call("c1", "echo", {"value": "1"})))
    handle, result = run(executor, agent)
    assert (result.status, result.step_count) == ("failed", 1)
    assert "max_steps" in result.error
    session = executor.get_session(handle.session_id)
    assert (session.status, session.stop_reason, session.output) == ("failed", "max_steps", None)


def test_stop_when_step_count_is(executor):
    agent = define_agent(unique("stop-count"), tools=[echo], max_steps=10, stop_when=step_count_is(2))
    steps = [calls(call(f"c{i}", "echo", {"value": str(i)})) for i in range(5)]
    use_model(executor, *steps)
    handle, result = run(executor, agent)
    assert (result.status, result.step_count) == ("completed", 2)
    assert executor.get_session(handle.session_id).stop_reason == "max_steps"


def test_stop_when_has_tool_call(executor):
    agent = define_agent(unique("stop-tool"), tools=[echo, add], stop_when=[has_tool_call("add")])
    use_model(
        executor,
        calls(call("c1", "echo", {"value": "1"})),
        calls(call("c2", "echo", {"value": "2"})),
        calls(call("c3", "add", {"a": 1, "b": 1})),
        calls(call("c4", "echo", {"value": "never"})),
    )
    handle, result = run(executor, agent)
    assert (result.status, result.step_count) == ("completed", 3)
    messages = executor.get_session(handle.session_id).messages
    assert json.loads(result_for(messages, "c3").content) == {"sum": 2}


def test_stop_when_total_tokens_exceed(executor):
    agent = define_agent(unique("stop-tokens"), tools=[echo], stop_when=total_tokens_exceed(250))
    mock = MockLLMAdapter()
    for i in range(5):
        mock.add_response(calls(call(f"c{i}", "echo", {"value": str(i)})), usage=Usage(input_tokens=80, output_tokens=20, total_tokens=100))
    executor.llm = mock
    handle, result = run(executor, agent)
    assert (result.status, result.step_count) == ("completed", 3)  # 300 > 250 after step 3
    assert mock.pending == 2
    assert executor.get_usage(handle.session_id).total_tokens == 300


def test_runaway_guard_fails_the_run_when_the_same_tool_fails_three_steps_running(executor):
    @tool
    def flaky(x: int) -> dict:
        """Always fails."""
        raise RuntimeError(f"flaky broke on {x}")

    agent = define_agent(unique("runaway"), tools=[flaky, echo], max_steps=10)
    steps = [calls(call(f"c{i}", "flaky", {"x": i})) for i in range(6)]
    mock = use_model(executor, *steps)
    handle, result = run(executor, agent)
    assert (result.status, result.step_count) == ("failed", 3)
    assert "flaky" in result.error and "3" in result.error
    assert len(mock.inputs) == 3
    session = executor.get_session(handle.session_id)
    assert session.status == "failed"
    assert [m.is_error for m in tool_results(session.messages)] == [True, True, True]
    assert_paired(session.messages)


def test_runaway_guard_counter_resets_after_a_success(executor):
    state = {"calls": 0}

    @tool
    def sometimes(x: int) -> dict:
        """Fails except on the third call."""
        state["calls"] += 1
        if state["calls"] == 3:
            return {"ok": x}
        raise RuntimeError("nope")

    agent = define_agent(unique("runaway-reset"), tools=[sometimes], max_steps=10)
    steps = [calls(call(f"c{i}", "sometimes", {"x": i})) for i in range(5)]
    use_model(executor, *steps, text("gave up politely"))
    _, result = run(executor, agent)
    # fail, fail, succeed (reset), fail, fail, then the text answer: never 3 in a row
    assert (result.status, result.output, result.step_count) == ("completed", "gave up politely", 6)


def test_max_tokens_recovery_for_an_output_schema_agent(executor):
    agent = define_agent(unique("maxtok"), output_schema=Answer)
    mock = use_model(
        executor,
        text("A very long essay that got cut", stop_reason="max_tokens"),
        finish("f1", answer="short", confidence=0.7),
    )
    handle, result = run(executor, agent)
    assert (result.status, result.output, result.step_count) == ("completed", {"answer": "short", "confidence": 0.7}, 2)
    messages = executor.get_session(handle.session_id).messages
    assert [m.role for m in messages] == ["user", "assistant", "user", "assistant", "tool"]
    recovery = messages[2]
    assert "max_tokens" in recovery.content and "`__finish__`" in recovery.content
    assert mock.get_last_input().messages[-1] == recovery


def test_max_tokens_without_output_schema_fails(executor):
    agent = define_agent(unique("maxtok-text"))
    use_model(executor, text("cut off", stop_reason="max_tokens"))
    _, result = run(executor, agent)
    assert (result.status, result.stop_reason) == ("failed", "max_tokens")


def test_text_without_finishing_keeps_an_output_schema_agent_going(executor):
    agent = define_agent(unique("nudge"), output_schema=Answer)
    use_model(executor, text("let me think"), finish("f1", answer="a", confidence=0.1))
    _, result = run(executor, agent)
    assert (result.status, result.step_count) == ("completed", 2)


# --- self-healing: every failure becomes a tool result, nothing is lost ------------------------


def test_raising_tool_becomes_an_error_result_and_the_run_continues(executor):
    @tool
    def explode(reason: str) -> dict:
        """Raises."""
        raise RuntimeError(f"kaboom: {reason}")

    @tool
    async def aexplode(reason: str) -> dict:
        """Raises, asynchronously."""
        raise ValueError(f"async kaboom: {reason}")

    agent = define_agent(unique("heal-raise"), tools=[explode, aexplode, echo])
    mock = use_model(
        executor,
        calls(
            call("c1", "explode", {"reason": "test"}),
            call("c2", "echo", {"value": "fine"}),
            call("c3", "aexplode", {"reason": "too"}),
        ),
        text("recovered"),
    )
    handle, result = run(executor, agent)
    assert (result.status, result.output) == ("completed", "recovered")
    messages = executor.get_session(handle.session_id).messages
    failed = result_for(messages, "c1")
    assert failed.is_error and failed.content == "RuntimeError: kaboom: test"
    assert result_for(messages, "c3").is_error and result_for(messages, "c3").content == "ValueError: async kaboom: too"
    assert json.loads(result_for(messages, "c2").content) == {"echoed": "fine"}
    assert failed in mock.get_last_input().messages
    assert_paired(messages)


def test_invalid_arguments_become_a_tool_input_error_result(executor):
    agent = define_agent(unique("heal-args"), tools=[add])
    use_model(executor, calls(call("c1", "add", {"a": "not a number"})), text("ok"))
    handle, result = run(executor, agent)
    assert result.status == "completed"
    failed = result_for(executor.get_session(handle.session_id).messages, "c1")
    assert failed.is_error
    assert failed.content.startswith("Invalid arguments for tool 'add':")
    assert "a" in failed.content and "b" in failed.content  # both problems are listed


def test_malformed_json_arguments_become_an_error_result(executor):
    ran: list[str] = []

    @tool
    def record(value: str) -> dict:
        """Records."""
        ran.append(value)
        return {}

    agent = define_agent(unique("heal-json"), tools=[record])
    use_model(
        executor,
        calls(call("c1", "record", '{"value": "unterminated', parse_error="Expecting ',' delimiter at char 24")),
        text("ok"),
    )
    handle, result = run(executor, agent)
    assert result.status == "completed"
    messages = executor.get_session(handle.session_id).messages
    failed = result_for(messages, "c1")
    assert failed.is_error and "Expecting ',' delimiter" in failed.content and "record" in failed.content
    assert ran == []  # the tool never ran on unparsable input
    # The raw text is kept in the transcript, for the model to see what it sent.
    assistant = next(m for m in messages if isinstance(m, AssistantMessage))
    assert assistant.tool_calls[0].arguments == '{"value": "unterminated'
    assert_paired(messages)


def test_unknown_tool_becomes_an_error_result(executor):
    agent = define_agent(unique("heal-unknown"), tools=[echo])
    use_model(
        executor,
        calls(call("c1", "does_not_exist", {"x": 1}), call("c2", "echo", {"value": "v"})),
        text("ok"),
    )
    handle, result = run(executor, agent)
    assert result.status == "completed"
    messages = executor.get_session(handle.session_id).messages
    failed = result_for(messages, "c1")
    assert failed.is_error and "does_not_exist" in failed.content and "Unknown tool" in failed.content
    assert [m.tool_call_id for m in tool_results(messages)] == ["c1", "c2"]
    assert_paired(messages)


def test_tool_returning_output_that_violates_its_output_schema_is_an_error_result(executor):
    bad = define_tool("bad", "Returns garbage.", Echo, lambda i, ctx: {"nope": 1}, output_schema=Echo)
    agent = define_agent(unique("heal-output"), tools=[bad])
    use_model(executor, calls(call("c1", "bad", {"value": "x"})), text("ok"))
    handle, result = run(executor, agent)
    assert result.status == "completed"
    failed = result_for(executor.get_session(handle.session_id).messages, "c1")
    assert failed.is_error and "value" in failed.content


def test_calls_beside_a_successful_finish_are_answered_not_run(executor):
    ran: list[str] = []

    @tool
    def side(value: str) -> dict:
        """Side effect."""
        ran.append(value)
        return {}

    agent = define_agent(unique("finish-skip"), tools=[side], output_schema=Answer)
    use_model(executor, calls(call("c1", "side", {"value": "x"}), call("f1", "__finish__", {"answer": "a", "confidence": 1})))
    handle, result = run(executor, agent)
    assert result.status == "completed"
    assert ran == []
    messages = executor.get_session(handle.session_id).messages
    assert result_for(messages, "c1").is_error
    assert_paired(messages)
