"""LiteLLMAdapter.stream_step against a real HTTP stub on 127.0.0.1 that streams OpenAI
chunks as Server-Sent Events (litellm and httpx are not mocked), and MockLLMAdapter's
streaming."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from llm_stub_server import StubLLMServer, openai_error, openai_stream

from helix_dbos._deltas import Delta
from helix_dbos.llm import LiteLLMAdapter, MockLLMAdapter, PermanentLLMError, TransientLLMError, generate_with_retry
from helix_dbos.types import (
    LLMConfig,
    Message,
    ParsedToolCall,
    SystemMessage,
    TextStepResult,
    ThinkingContent,
    ToolCallsStepResult,
    ToolSpec,
    UserMessage,
)

SEARCH = ToolSpec(
    name="search",
    description="Search the web",
    parameters={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
)
CONVERSATION: list[Message] = [SystemMessage(content="You are terse."), UserMessage(content="Find x")]


@pytest.fixture
def stub() -> Iterator[StubLLMServer]:
    with StubLLMServer() as server:
        yield server


def config(stub: StubLLMServer, model: str = "gpt-4o") -> LLMConfig:
    return LLMConfig(model=f"openai/{model}", extra={"api_base": stub.openai_base, "api_key": "sk-test"})


def stream(stub: StubLLMServer, tools: list[ToolSpec] | None = None) -> tuple[Any, Any, list[Delta]]:
    deltas: list[Delta] = []
    result, usage = asyncio.run(
        LiteLLMAdapter().stream_step(CONVERSATION, tools or [], config(stub), None, deltas.append)
    )
    return result, usage, deltas


def test_text_and_reasoning_stream_as_deltas_and_assemble_into_the_answer(stub: StubLLMServer) -> None:
    stub.add(openai_stream(content=["x ", "is ", "42"], reasoning=["look ", "it up"], usage=(11, 7)))

    result, usage, deltas = stream(stub)

    assert [(d.kind, d.text) for d in deltas] == [
        ("reasoning", "look "), ("reasoning", "it up"), ("text", "x "), ("text", "is "), ("text", "42"),
    ]
    assert result == TextStepResult(
        content="x is 42", thinking=ThinkingContent(content="look it up"), should_stop=True, stop_reason="end_turn"
    )
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (11, 7, 18)
    assert usage.cost_usd is not None and usage.cost_usd > 0
    body = stub.requests[0].body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


def test_tool_call_arguments_stream_tagged_with_their_call(stub: StubLLMServer) -> None:
    stub.add(openai_stream(
        content=["Searching."],
        tool_calls=[("call_1", "search", ['{"q"', ': "x"}']), ("call_2", "search", ['{"q": "y"}'])],
        finish_reason="tool_calls",
    ))

    result, _, deltas = stream(stub, [SEARCH])

    calls = [(d.tool_call_id, d.tool_name, d.tool_index, d.text) for d in deltas if d.kind == "tool_call"]
    assert calls == [
        ("call_1", "search", 0, '{"q"'), ("call_1", "search", 0, ': "x"}'), ("call_2", "search", 1, '{"q": "y"}'),
    ]
    assert isinstance(result, ToolCallsStepResult)
    assert result.content == "Searching."
    assert result.tool_calls == [
        ParsedToolCall(id="call_1", name="search", arguments={"q": "x"}),
        ParsedToolCall(id="call_2", name="search", arguments={"q": "y"}),
    ]
    assert result.stop_reason == "tool_use"


def test_a_refused_stream_is_classified_like_a_call(stub: StubLLMServer) -> None:
    stub.add(openai_error(429, "slow down", {"retry-after": "2"}))
    with pytest.raises(TransientLLMError) as caught:
        stream(stub)
    assert caught.value.status_code == 429 and caught.value.retry_after == 2.0

    stub.add(openai_error(401, "bad key"))
    with pytest.raises(PermanentLLMError):
        stream(stub)


def test_a_stream_cut_off_midway_is_transient_and_retried_as_a_new_attempt(stub: StubLLMServer) -> None:
    stub.add(openai_stream(content=["par", "tial", "!"], cut_after=2), openai_stream(content=["whole"]))
    seen: list[tuple[int, str]] = []

    result, _ = asyncio.run(generate_with_retry(
        LiteLLMAdapter(), CONVERSATION, [], config(stub), base_delay=0.001, max_delay=0.01,
        on_delta=lambda attempt, delta: seen.append((attempt, delta.text)),
    ))

    assert result.content == "whole"
    assert seen == [(1, "par"), (2, "whole")]
    assert len(stub.requests) == 2


def test_chunks_arrive_as_the_server_sends_them(stub: StubLLMServer) -> None:
    response = openai_stream(content=["a", "b", "c"], chunk_delay=0.3)
    stub.add(response)
    arrivals: list[float] = []

    asyncio.run(LiteLLMAdapter().stream_step(
        CONVERSATION, [], config(stub), None, lambda d: arrivals.append(time.monotonic())
    ))

    assert len(arrivals) == 3
    assert arrivals[0] < response.sent_at[-1]  # the first delta came before the server wrote its last chunk


def test_mock_streams_reasoning_text_and_tool_arguments_in_pieces() -> None:
    mock = MockLLMAdapter(stream_chunk_chars=4)
    mock.add_response({
        "content": "hello world", "thinking": {"content": "hmm"},
        "tool_calls": [{"id": "t1", "name": "search", "arguments": {"q": "x"}}],
    })
    deltas: list[Delta] = []

    result, _ = asyncio.run(mock.stream_step(CONVERSATION, [SEARCH], LLMConfig(model="mock"), None, deltas.append))

    assert [(d.kind, d.text) for d in deltas] == [
        ("reasoning", "hmm"), ("text", "hell"), ("text", "o wo"), ("text", "rld"),
        ("tool_call", '{"q"'), ("tool_call", ':"x"'), ("tool_call", "}"),
    ]
    assert {(d.tool_call_id, d.tool_name, d.tool_index) for d in deltas if d.kind == "tool_call"} == {("t1", "search", 0)}
    assert isinstance(result, ToolCallsStepResult) and result.content == "hello world"


def test_mock_raises_a_queued_error_before_any_delta() -> None:
    mock = MockLLMAdapter()
    mock.add_error(TransientLLMError("busy"))
    deltas: list[Delta] = []

    with pytest.raises(TransientLLMError):
        asyncio.run(mock.stream_step(CONVERSATION, [], LLMConfig(model="mock"), None, deltas.append))
    assert deltas == []
