"""LiteLLMAdapter against a real HTTP stub on 127.0.0.1 (litellm and httpx are not mocked).

The stub speaks the OpenAI chat API (``openai/<model>`` with ``api_base``) and the
Anthropic Messages API (``anthropic/<model>``), records every request body and serves
scripted responses, so each test checks both what we sent and what we made of the answer.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import socket
import subprocess
import sys
import time
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

import pytest
from llm_stub_server import StubLLMServer, anthropic_message, openai_chat, openai_error

from helix_dbos.llm import LiteLLMAdapter, LLMError, PermanentLLMError, TransientLLMError, generate_with_retry
from helix_dbos.llm.litellm_adapter import load_litellm
from helix_dbos.llm.litellm_errors import classify_litellm_error
from helix_dbos.types import (
    AssistantMessage,
    ErrorStepResult,
    LLMConfig,
    Message,
    ParsedSubAgentCall,
    ParsedToolCall,
    SystemMessage,
    TextStepResult,
    ThinkingContent,
    ToolCallsStepResult,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)

T = TypeVar("T")
FAST_RETRY: dict[str, Any] = {"base_delay": 0.001, "max_delay": 0.01}
SEARCH = ToolSpec(
    name="search",
    description="Search the web",
    parameters={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
)
FINISH = ToolSpec(
    name="__finish__",
    description="Return the final answer",
    parameters={
        "type": "object",
        "properties": {"answer": {"type": "string"}},
        "required": ["answer"],
        "additionalProperties": False,
    },
)
LOOPBACK = ("127.0.0.1", "::1", "localhost")
CONVERSATION: list[Message] = [SystemMessage(content="You are terse."), UserMessage(content="Find x")]


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


@pytest.fixture(scope="module", autouse=True)
def only_loopback_network() -> Iterator[None]:
    """Refuse every name lookup or connection beyond 127.0.0.1: litellm must not phone home."""
    attempts: list[Any] = []
    original_connect, original_getaddrinfo = socket.socket.connect, socket.getaddrinfo

    def connect(sock: socket.socket, address: Any) -> Any:
        if sock.family in (socket.AF_INET, socket.AF_INET6) and address[0] not in LOOPBACK:
            attempts.append(address)
            raise OSError(f"test forbids network access to {address}")
        return original_connect(sock, address)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host not in LOOPBACK:
            attempts.append(host)
            raise socket.gaierror(f"test forbids resolving {host}")
        return original_getaddrinfo(host, *args, **kwargs)

    socket.socket.connect, socket.getaddrinfo = connect, getaddrinfo  # type: ignore[method-assign,assignment]
    yield
    socket.socket.connect, socket.getaddrinfo = original_connect, original_getaddrinfo  # type: ignore[method-assign]
    assert attempts == [], f"litellm tried to reach {attempts}"


@pytest.fixture
def stub() -> Iterator[StubLLMServer]:
    with StubLLMServer() as server:
        yield server


def openai_config(stub: StubLLMServer, model: str = "gpt-4o", **fields: Any) -> LLMConfig:
    extra = {"api_base": stub.openai_base, "api_key": "sk-test", **fields.pop("extra", {})}
    return LLMConfig(model=f"openai/{model}", extra=extra, **fields)


def generate(stub: StubLLMServer, tools: list[ToolSpec] | None = None, **config: Any) -> Any:
    return run(LiteLLMAdapter().generate_step(CONVERSATION, tools or [], openai_config(stub, **config)))


# --- answers ------------------------------------------------------------------------------


def test_text_answer_with_usage_cost_and_reasoning(stub: StubLLMServer) -> None:
    stub.add(openai_chat(content="x is 42", reasoning_content="look it up", usage=(11, 7)))

    result, usage = generate(stub)

    assert result == TextStepResult(
        content="x is 42",
        thinking=ThinkingContent(content="look it up"),
        should_stop=True,
        stop_reason="end_turn",
    )
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (11, 7, 18)
    assert usage.cost_usd is not None and usage.cost_usd > 0  # gpt-4o is in litellm's bundled price table
    assert usage.latency_ms > 0
    assert len(stub.requests) == 1


def test_cost_is_none_for_a_model_litellm_cannot_price(stub: StubLLMServer) -> None:
    stub.add(openai_chat(content="hi", model="my-local-model"))

    _, usage = generate(stub, model="my-local-model")

    assert usage.cost_usd is None
    assert usage.total_tokens == 18


def test_two_parallel_tool_calls(stub: StubLLMServer) -> None:
    stub.add(
        openai_chat(
            tool_calls=[("call_1", "search", '{"q": "x"}'), ("call_2", "search", '{"q": "y"}')],
            finish_reason="tool_calls",
        )
    )

    result, _ = generate(stub, [SEARCH])

    assert result == ToolCallsStepResult(
        tool_calls=[
            ParsedToolCall(id="call_1", name="search", arguments={"q": "x"}),
            ParsedToolCall(id="call_2", name="search", arguments={"q": "y"}),
        ],
        stop_reason="tool_use",
    )


def test_malformed_arguments_become_a_parse_error_not_a_crash(stub: StubLLMServer) -> None:
    stub.add(openai_chat(tool_calls=[("call_1", "search", '{"q": "x"')], finish_reason="tool_calls"))

    result, _ = generate(stub, [SEARCH])

    assert isinstance(result, ToolCallsStepResult)
    [call] = result.tool_calls
    assert call.arguments == '{"q": "x"'
    assert call.parse_error is not None and "invalid JSON" in call.parse_error


def test_length_finish_on_text_is_a_max_tokens_stop(stub: StubLLMServer) -> None:
    stub.add(openai_chat(content="Once upon a ti", finish_reason="length"))

    result, _ = generate(stub)

    assert isinstance(result, TextStepResult)
    assert (result.content, result.stop_reason) == ("Once upon a ti", "max_tokens")


@pytest.mark.parametrize(
    ("finish_reason", "stop_reason"),
    [("content_filter", "content_filter"), ("function_call", "tool_use")],
)
def test_other_finish_reasons(stub: StubLLMServer, finish_reason: str, stop_reason: str) -> None:
    stub.add(openai_chat(content="", finish_reason=finish_reason))

    result, _ = generate(stub)

    assert result.stop_reason == stop_reason


def test_openai_refusal_is_a_refusal_stop(stub: StubLLMServer) -> None:
    response = openai_chat(content=None)
    response.body["choices"][0]["message"]["refusal"] = "I can't help with that."
    stub.add(response)

    result, _ = generate(stub)

    assert result == TextStepResult(content="I can't help with that.", should_stop=True, stop_reason="refusal")


def test_subagent_call_is_split_from_tool_calls(stub: StubLLMServer) -> None:
    stub.add(
        openai_chat(
            tool_calls=[
                ("call_1", "search", '{"q": "x"}'),
                ("call_2", "subagent__summarizer", '{"text": "long"}'),
            ],
            finish_reason="tool_calls",
        )
    )
    summarizer = ToolSpec(name="subagent__summarizer", parameters={"type": "object", "properties": {}})

    result, _ = generate(stub, [SEARCH, summarizer])

    assert isinstance(result, ToolCallsStepResult)
    assert [call.name for call in result.tool_calls] == ["search"]
    assert result.sub_agent_calls == [ParsedSubAgentCall(id="call_2", agent_type="summarizer", input={"text": "long"})]


# --- what is sent -----------------------------------------------------------------------------


def test_request_body_has_messages_tools_strict_flag_and_settings(stub: StubLLMServer) -> None:
    stub.add(openai_chat(content="ok"))
    strict_tool = SEARCH.model_copy(update={"name": "lookup", "strict": True})
    history: list[Message] = [
        *CONVERSATION,
        AssistantMessage(
            content="Searching.",
            tool_calls=[ParsedToolCall(id="call_1", name="search", arguments={"q": "x"})],
            thinking=ThinkingContent(content="private", signature="sig"),
        ),
        ToolResultMessage(tool_call_id="call_1", tool_name="search", content='{"hits": 3}'),
    ]
    config = openai_config(
        stub, strict_output=True, tool_choice="required", temperature=0.3, max_tokens=256, extra={"user": "u-7"}
    )

    run(LiteLLMAdapter().generate_step(history, [SEARCH, strict_tool, FINISH], config))

    body = stub.requests[0].body
    assert stub.requests[0].path == "/v1/chat/completions"
    assert body["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Find x"},
        {
            "role": "assistant",
            "content": "Searching.",
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "search", "arguments": '{"q": "x"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"hits": 3}'},
    ]
    functions = {tool["function"]["name"]: tool["function"] for tool in body["tools"]}
    assert functions["search"] == {
        "name": "search",
        "description": "Search the web",
        "parameters": SEARCH.parameters,
    }
    assert functions["lookup"]["strict"] is True
    assert functions["__finish__"]["strict"] is True
    assert functions["__finish__"]["parameters"] == FINISH.parameters
    assert (body["tool_choice"], body["temperature"], body["max_tokens"], body["user"]) == ("required", 0.3, 256, "u-7")
    assert stub.requests[0].headers["authorization"] == "Bearer sk-test"


def test_strict_is_left_out_for_a_model_without_constrained_decoding(stub: StubLLMServer) -> None:
    stub.add(openai_chat(content="ok", model="my-local-model"))
    strict_tool = SEARCH.model_copy(update={"strict": True})

    generate(stub, [strict_tool, FINISH], model="my-local-model", strict_output=True)

    assert all("strict" not in tool["function"] for tool in stub.requests[0].body["tools"])


def test_strict_is_not_sent_unless_asked(stub: StubLLMServer) -> None:
    stub.add(openai_chat(content="ok"))

    generate(stub, [SEARCH, FINISH])

    assert all("strict" not in tool["function"] for tool in stub.requests[0].body["tools"])


def test_a_tool_name_as_tool_choice_forces_that_function(stub: StubLLMServer) -> None:
    stub.add(openai_chat(content="ok"))

    generate(stub, [SEARCH, FINISH], tool_choice="__finish__")

    assert stub.requests[0].body["tool_choice"] == {"type": "function", "function": {"name": "__finish__"}}


# --- errors and retries ---------------------------------------------------------------------


def test_429_then_success_is_retried_once_honouring_retry_after(stub: StubLLMServer) -> None:
    stub.add(openai_error(429, "Rate limit reached", {"retry-after-ms": "150"}), openai_chat(content="ok"))
    config = openai_config(stub)

    started = time.perf_counter()
    result, _ = run(generate_with_retry(LiteLLMAdapter(), CONVERSATION, [], config, base_delay=0.001, max_delay=1.0))
    elapsed = time.perf_counter() - started

    assert result == TextStepResult(content="ok", should_stop=True, stop_reason="end_turn")
    assert len(stub.requests) == 2  # litellm and the OpenAI SDK did not retry on their own
    assert elapsed >= 0.15  # the hint, not the 1 ms base delay


def test_401_is_permanent_one_request_and_an_error_result(stub: StubLLMServer) -> None:
    stub.add(openai_error(401, "Incorrect API key provided"))

    result, _ = run(generate_with_retry(LiteLLMAdapter(), CONVERSATION, [], openai_config(stub), **FAST_RETRY))

    assert isinstance(result, ErrorStepResult)
    assert (result.error_type, result.should_stop, result.stop_reason) == ("AuthenticationError", True, "error")
    assert "Incorrect API key" in result.error
    assert len(stub.requests) == 1


def test_transient_errors_exhaust_attempts_into_an_error_result(stub: StubLLMServer) -> None:
    stub.add(*[openai_error(503, "overloaded") for _ in range(3)])

    result, _ = run(
        generate_with_retry(LiteLLMAdapter(), CONVERSATION, [], openai_config(stub), max_attempts=3, **FAST_RETRY)
    )

    assert isinstance(result, ErrorStepResult)
    assert result.error_type == "ServiceUnavailableError"
    assert "gave up after 3 attempts" in result.error
    assert len(stub.requests) == 3


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        (openai_error(500, "boom"), TransientLLMError),
        (openai_error(502, "bad gateway"), TransientLLMError),
        (openai_error(408, "timeout"), TransientLLMError),
        (openai_error(400, "bad request"), PermanentLLMError),
        (openai_error(403, "forbidden"), PermanentLLMError),
        (openai_error(404, "no such model"), PermanentLLMError),
        (openai_error(400, "This model's maximum context length is 128000 tokens."), PermanentLLMError),
        (openai_error(429, "You exceeded your current quota: insufficient_quota"), PermanentLLMError),
    ],
)
def test_errors_are_classified_by_status(stub: StubLLMServer, response: Any, expected: type[LLMError]) -> None:
    stub.add(response)

    with pytest.raises(expected) as caught:
        generate(stub)

    assert caught.value.status_code == response.status
    assert len(stub.requests) == 1


def test_connection_refused_is_transient() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = LLMConfig(model="openai/gpt-4o", extra={"api_base": f"http://127.0.0.1:{port}/v1", "api_key": "sk"})

    with pytest.raises(TransientLLMError):
        run(LiteLLMAdapter().generate_step(CONVERSATION, [], config))


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "2"}, 2.0),
        ({"retry-after-ms": "250", "retry-after": "1"}, 0.25),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),  # an HTTP date in the past
        ({}, None),
    ],
)
def test_retry_after_hints_are_read_from_the_response(
    stub: StubLLMServer, headers: dict[str, str], expected: float | None
) -> None:
    stub.add(openai_error(429, "Rate limit reached", headers))

    with pytest.raises(TransientLLMError) as caught:
        generate(stub)

    assert caught.value.retry_after == expected


def test_a_failure_inside_litellm_is_permanent() -> None:
    """litellm reports its own bugs (e.g. a missing optional import) as a 500 APIConnectionError."""
    litellm = load_litellm()
    try:
        try:
            raise ImportError("No module named 'mcp'")
        except ImportError as missing:
            raise litellm.APIConnectionError(message=str(missing), llm_provider="openai", model="gpt-4o") from None
    except Exception as exc:
        error = classify_litellm_error(exc)

    assert isinstance(error, PermanentLLMError)
    assert error.error_type == "APIConnectionError"


def test_a_missing_api_key_is_permanent_at_once(stub: StubLLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """The OpenAI SDK refuses to send without a key; litellm reports that as a 500."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    config = LLMConfig(model="openai/gpt-4o", extra={"api_base": stub.openai_base})

    with pytest.raises(PermanentLLMError, match="Missing credentials"):
        run(LiteLLMAdapter().generate_step(CONVERSATION, [], config))
    result, _ = run(generate_with_retry(LiteLLMAdapter(), CONVERSATION, [], config, **FAST_RETRY))

    assert isinstance(result, ErrorStepResult)
    assert (result.should_stop, result.stop_reason) == (True, "error")
    assert "Missing credentials" in result.error
    assert stub.requests == []


# --- Anthropic through litellm -------------------------------------------------------------------


def anthropic_config(stub: StubLLMServer) -> LLMConfig:
    return LLMConfig(
        model="anthropic/claude-sonnet-4-5", max_tokens=1024, extra={"api_base": stub.base_url, "api_key": "sk-ant"}
    )


def test_anthropic_tool_use_and_tool_result_round_trip(stub: StubLLMServer) -> None:
    stub.add(
        anthropic_message(
            [
                {"type": "thinking", "thinking": "I should search.", "signature": "sig-1"},
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"q": "x"}},
            ],
            stop_reason="tool_use",
        ),
        anthropic_message([{"type": "text", "text": "x is 42"}]),
    )
    adapter, config = LiteLLMAdapter(), anthropic_config(stub)

    first, usage = run(adapter.generate_step(CONVERSATION, [SEARCH], config))

    assert first == ToolCallsStepResult(
        content="Let me look.",
        tool_calls=[ParsedToolCall(id="toolu_1", name="search", arguments={"q": "x"})],
        thinking=ThinkingContent(content="I should search.", signature="sig-1"),
        stop_reason="tool_use",
    )
    assert (usage.input_tokens, usage.output_tokens) == (21, 9)
    history: list[Message] = [
        *CONVERSATION,
        AssistantMessage(content=first.content, tool_calls=first.tool_calls, thinking=first.thinking),
        ToolResultMessage(tool_call_id="toolu_1", tool_name="search", content='{"hits": 3}'),
    ]

    second, _ = run(adapter.generate_step(history, [SEARCH], config))

    assert second == TextStepResult(content="x is 42", should_stop=True, stop_reason="end_turn")
    request = stub.requests[1]
    assert request.path == "/v1/messages"
    assert request.headers["x-api-key"] == "sk-ant"
    assert request.body["system"] == [{"type": "text", "text": "You are terse."}]
    assistant, tool_turn = request.body["messages"][1:]
    assert assistant["content"] == [
        {"type": "thinking", "thinking": "I should search.", "signature": "sig-1"},
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"q": "x"}},
    ]
    assert tool_turn == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": '{"hits": 3}'}],
    }
    assert request.body["tools"][0]["name"] == "search"
    assert request.body["max_tokens"] == 1024


def test_anthropic_max_tokens_maps_to_max_tokens(stub: StubLLMServer) -> None:
    stub.add(anthropic_message([{"type": "text", "text": "trunc"}], stop_reason="max_tokens"))

    result, _ = run(LiteLLMAdapter().generate_step(CONVERSATION, [], anthropic_config(stub)))

    assert result.stop_reason == "max_tokens"


# --- import hygiene ---------------------------------------------------------------------------------


def test_importing_helix_dbos_does_not_import_litellm() -> None:
    code = "import sys, helix_dbos, helix_dbos.llm; assert 'litellm' not in sys.modules, 'litellm imported'"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_loading_litellm_keeps_it_offline_but_respects_the_user(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LITELLM_LOCAL_MODEL_COST_MAP", raising=False)
    monkeypatch.setenv("LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS", "False")
    load_litellm.cache_clear()

    litellm = load_litellm()

    assert os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    assert os.environ["LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS"] == "False"
    assert litellm.suppress_debug_info is True
    assert getattr(litellm, "telemetry", False) is False


def test_adapter_pickles_with_its_default_kwargs(stub: StubLLMServer) -> None:
    stub.add(openai_chat(content="ok"))
    adapter = pickle.loads(pickle.dumps(LiteLLMAdapter(api_base=stub.openai_base, api_key="sk-default")))

    result, _ = run(adapter.generate_step(CONVERSATION, [], LLMConfig(model="openai/gpt-4o")))

    assert result.content == "ok"
    assert stub.requests[0].headers["authorization"] == "Bearer sk-default"
