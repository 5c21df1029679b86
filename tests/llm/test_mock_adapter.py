"""MockLLMAdapter (queue, dict forms, responder, inputs, pickling, latency) and generate_with_retry."""

from __future__ import annotations

import asyncio
import pickle
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest
from pydantic import BaseModel

from helix_dbos.llm import (
    LiteLLMAdapter,
    LLMAdapter,
    MockExhaustedError,
    MockLLMAdapter,
    PermanentLLMError,
    TransientLLMError,
    backoff_delay,
    generate_with_retry,
)
from helix_dbos.types import (
    ErrorStepResult,
    LLMConfig,
    Message,
    ParsedSubAgentCall,
    ParsedToolCall,
    StructuredOutputStepResult,
    SystemMessage,
    TextStepResult,
    ToolCallsStepResult,
    ToolSpec,
    Usage,
    UserMessage,
)

T = TypeVar("T")
MESSAGES: list[Message] = [SystemMessage(content="Be brief."), UserMessage(content="Hello there")]
TOOLS = [ToolSpec(name="search", description="Search")]
CONFIG = LLMConfig(model="mock", temperature=0.1)


class Answer(BaseModel):
    text: str


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def call(mock: MockLLMAdapter, messages: list[Message] = MESSAGES) -> tuple[Any, Usage]:
    return run(mock.generate_step(messages, TOOLS, CONFIG))


def count_messages(messages: list[Message], tools: list[ToolSpec]) -> dict[str, Any]:
    """A module-level responder, so a mock holding it can be pickled."""
    return {"content": f"{len(messages)} messages, {len(tools)} tools", "shouldStop": True}


# --- queue ----------------------------------------------------------------------------------------


def test_queued_answers_come_back_in_order() -> None:
    mock = MockLLMAdapter()
    first = ToolCallsStepResult(tool_calls=[ParsedToolCall(id="t1", name="search", arguments={"q": "x"})])
    mock.add_response(first)
    mock.add_response(TextStepResult(content="done", should_stop=True))

    assert mock.pending == 2
    assert call(mock)[0] == first
    assert call(mock)[0] == TextStepResult(content="done", should_stop=True)
    assert mock.pending == 0


def test_explicit_usage_is_reported() -> None:
    mock = MockLLMAdapter()
    usage = Usage(input_tokens=100, output_tokens=5, total_tokens=105, cost_usd=0.01)
    mock.add_response({"content": "hi"}, usage=usage)

    assert call(mock)[1] == usage


def test_default_usage_is_deterministic_and_grows_with_the_conversation() -> None:
    mock = MockLLMAdapter(default_response={"content": "ok"})

    _, short = call(mock)
    _, again = call(mock)
    _, longer = call(mock, [*MESSAGES, UserMessage(content="and more " * 40)])

    assert short == again
    assert short.input_tokens > 0 and short.output_tokens > 0
    assert short.total_tokens == short.input_tokens + short.output_tokens
    assert longer.input_tokens > short.input_tokens + 80  # 360 more characters
    assert short.cost_usd is None


# --- dict forms ---------------------------------------------------------------------------------------


def test_snake_case_dicts_are_validated() -> None:
    mock = MockLLMAdapter()
    mock.add_response(
        {
            "type": "tool_calls",
            "tool_calls": [{"id": "t1", "name": "search", "arguments": {"q": "x"}}],
            "sub_agent_calls": [{"id": "s1", "agent_type": "summarizer", "input": {"text": "t"}}],
            "stop_reason": "tool_use",
        }
    )

    result, _ = call(mock)

    assert result == ToolCallsStepResult(
        tool_calls=[ParsedToolCall(id="t1", name="search", arguments={"q": "x"})],
        sub_agent_calls=[ParsedSubAgentCall(id="s1", agent_type="summarizer", input={"text": "t"})],
        stop_reason="tool_use",
    )


def test_camel_case_dicts_from_the_seeds_are_accepted() -> None:
    mock = MockLLMAdapter()
    mock.add_response(
        {
            "type": "tool_calls",
            "toolCalls": [{"id": "t1", "name": "search", "arguments": {"keepCase": 1}}],
            "subAgentCalls": [{"id": "s1", "agentType": "summarizer", "input": {"someKey": "t"}}],
        }
    )
    mock.add_response({"type": "text", "content": "done", "shouldStop": True, "stopReason": "end_turn"})

    tools_result, _ = call(mock)
    text_result, _ = call(mock)

    assert tools_result.tool_calls[0].arguments == {"keepCase": 1}  # user data is not renamed
    assert tools_result.sub_agent_calls == [
        ParsedSubAgentCall(id="s1", agent_type="summarizer", input={"someKey": "t"})
    ]
    assert text_result == TextStepResult(content="done", should_stop=True, stop_reason="end_turn")


@pytest.mark.parametrize(
    ("data", "expected_type"),
    [
        ({"content": "hi"}, TextStepResult),
        ({"toolCalls": [{"id": "t", "name": "search"}]}, ToolCallsStepResult),
        ({"output": {"text": "x"}}, StructuredOutputStepResult),
        ({"error": "Rate limited"}, ErrorStepResult),
    ],
)
def test_a_dict_without_type_is_typed_by_its_keys(data: dict[str, Any], expected_type: type) -> None:
    mock = MockLLMAdapter()
    mock.add_response(data)

    assert isinstance(call(mock)[0], expected_type)


def test_an_invalid_dict_is_rejected_when_queued() -> None:
    with pytest.raises(ValueError):
        MockLLMAdapter().add_response({"type": "text", "content": "x", "stop_reason": "bored"})


# --- responder and defaults ---------------------------------------------------------------------


def test_responder_computes_answers_after_the_queue_is_used() -> None:
    mock = MockLLMAdapter(count_messages)
    mock.add_response({"content": "queued first"})

    first, _ = call(mock)
    second, _ = call(mock, [*MESSAGES, UserMessage(content="again")])

    assert first.content == "queued first"
    assert second == TextStepResult(content="3 messages, 1 tools", should_stop=True)


def test_empty_queue_raises_a_clear_error() -> None:
    mock = MockLLMAdapter()
    mock.add_response({"content": "only one"})
    call(mock)

    with pytest.raises(MockExhaustedError, match="no response for call #2"):
        call(mock)


def test_default_response_answers_every_unscripted_call() -> None:
    mock = MockLLMAdapter(default_response={"content": "fallback", "shouldStop": True})

    first, _ = call(mock)
    first.content = "mutated by the caller"
    second, _ = call(mock)

    assert second == TextStepResult(content="fallback", should_stop=True)


def test_queued_errors_are_raised() -> None:
    mock = MockLLMAdapter()
    mock.add_error(PermanentLLMError("bad key", status_code=401))

    with pytest.raises(PermanentLLMError, match="bad key"):
        call(mock)


# --- inputs -----------------------------------------------------------------------------------------


def test_get_last_input_shows_messages_tools_config_and_schema() -> None:
    mock = MockLLMAdapter(default_response={"content": "ok"})
    messages = list(MESSAGES)

    run(mock.generate_step(messages, TOOLS, CONFIG, Answer))
    messages.append(UserMessage(content="later"))

    last = mock.get_last_input()
    assert last.messages == MESSAGES
    assert [tool.name for tool in last.tools] == ["search"]
    assert last.llm_config == CONFIG
    assert last.output_schema is Answer
    assert len(mock.inputs) == 1


def test_recorded_inputs_are_copies() -> None:
    mock = MockLLMAdapter(default_response={"content": "ok"})
    message = UserMessage(content="original")

    run(mock.generate_step([message], TOOLS, CONFIG))
    message.content = "changed"

    assert mock.get_last_input().messages[0].content == "original"


def test_get_last_input_before_any_call() -> None:
    with pytest.raises(LookupError):
        MockLLMAdapter().get_last_input()


# --- pickling and latency -----------------------------------------------------------------------


def test_pickle_round_trip_keeps_queue_responder_and_history() -> None:
    mock = MockLLMAdapter(count_messages, delay_seconds=0.0)
    mock.add_response({"content": "queued"})
    mock.add_error(TransientLLMError("slow down", status_code=429, retry_after=1.5))
    mock.add_response({"content": "after the error"})
    call(mock)

    clone: MockLLMAdapter = pickle.loads(pickle.dumps(mock))

    assert clone.inputs == mock.inputs
    with pytest.raises(TransientLLMError) as caught:
        call(clone)
    assert (caught.value.status_code, caught.value.retry_after) == (429, 1.5)
    assert call(clone)[0].content == "after the error"
    assert call(clone)[0].content == "2 messages, 1 tools"
    assert mock.pending == 2  # the original is untouched


def test_delay_seconds_adds_latency() -> None:
    mock = MockLLMAdapter(default_response={"content": "ok"}, delay_seconds=0.05)

    started = time.perf_counter()
    _, usage = call(mock)

    assert time.perf_counter() - started >= 0.05
    assert usage.latency_ms == 50.0


def test_both_adapters_satisfy_the_protocol() -> None:
    assert isinstance(MockLLMAdapter(), LLMAdapter)
    assert isinstance(LiteLLMAdapter(), LLMAdapter)


# --- generate_with_retry ----------------------------------------------------------------------------


def retry(mock: MockLLMAdapter, **options: Any) -> tuple[Any, Usage]:
    return run(generate_with_retry(mock, MESSAGES, TOOLS, CONFIG, base_delay=0.001, max_delay=0.01, **options))


def test_transient_errors_are_retried_until_an_answer() -> None:
    mock = MockLLMAdapter()
    mock.add_error(TransientLLMError("429"))
    mock.add_error(TransientLLMError("503"))
    mock.add_response({"content": "ok"})

    result, _ = retry(mock)

    assert result.content == "ok"
    assert len(mock.inputs) == 3


def test_a_permanent_error_is_not_retried() -> None:
    mock = MockLLMAdapter()
    mock.add_error(PermanentLLMError("invalid key", error_type="AuthenticationError"))
    mock.add_response({"content": "never reached"})

    result, usage = retry(mock)

    assert result == ErrorStepResult(
        error="invalid key", error_type="AuthenticationError", should_stop=True, stop_reason="error"
    )
    assert len(mock.inputs) == 1
    assert usage.total_tokens == 0


def test_retries_stop_at_max_attempts() -> None:
    mock = MockLLMAdapter(default_response={"content": "too late"})
    for _ in range(2):
        mock.add_error(TransientLLMError("overloaded", error_type="ServiceUnavailableError"))

    result, _ = retry(mock, max_attempts=2)

    assert isinstance(result, ErrorStepResult)
    assert result.error == "overloaded (gave up after 2 attempts)"
    assert result.error_type == "ServiceUnavailableError"
    assert len(mock.inputs) == 2


def test_an_exhausted_mock_fails_the_step_with_its_message() -> None:
    result, _ = retry(MockLLMAdapter())

    assert isinstance(result, ErrorStepResult)
    assert result.error_type == "MockExhaustedError"


def test_other_exceptions_propagate() -> None:
    def broken(messages: list[Message], tools: list[ToolSpec]) -> dict[str, Any]:
        raise RuntimeError("bug in the responder")

    with pytest.raises(RuntimeError, match="bug in the responder"):
        retry(MockLLMAdapter(broken))


def test_max_attempts_must_be_positive() -> None:
    with pytest.raises(ValueError):
        retry(MockLLMAdapter(), max_attempts=0)


def test_backoff_doubles_with_jitter_and_is_capped() -> None:
    for attempt, ceiling in [(1, 0.5), (2, 1.0), (3, 2.0), (10, 20.0)]:
        delays = [backoff_delay(attempt, base_delay=0.5, max_delay=20.0) for _ in range(50)]
        assert all(ceiling / 2 <= delay <= ceiling for delay in delays)
        assert len(set(delays)) > 1  # jittered


def test_backoff_honours_retry_after_within_the_cap() -> None:
    assert backoff_delay(1, base_delay=0.5, max_delay=20.0, retry_after=7.0) == 7.0
    assert backoff_delay(1, base_delay=0.5, max_delay=20.0, retry_after=60.0) == 20.0
    assert backoff_delay(1, base_delay=0.5, max_delay=20.0, retry_after=-3.0) == 0.0
