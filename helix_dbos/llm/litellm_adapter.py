"""``LiteLLMAdapter``: any of litellm's providers behind the ``LLMAdapter`` protocol.

    adapter = LiteLLMAdapter()                                  # keys from the environment
    config = LLMConfig(model="anthropic/claude-sonnet-4-5", max_tokens=2048)
    result, usage = await adapter.generate_step(messages, tools, config)

    # an OpenAI-compatible server (vLLM, Ollama, a proxy) and default kwargs for every call
    adapter = LiteLLMAdapter(api_base="http://localhost:8000/v1", api_key="none")

Per call the adapter sends: the messages in OpenAI chat format, the tools as function
definitions, ``tool_choice``, ``temperature`` and ``max_tokens`` when set, the
constructor's kwargs and ``llm_config.extra`` (which wins), and ``num_retries=0`` /
``max_retries=0`` so that litellm and the OpenAI SDK never retry on their own
(:func:`~helix_dbos.llm.generate_with_retry` does, and counts each attempt once).

Strict function calling: ``"strict": true`` goes on ``__finish__`` when
``llm_config.strict_output`` is set, and on every tool whose ``ToolSpec.strict`` is set,
but only if ``litellm.supports_response_schema(model)`` says the model does constrained
decoding; otherwise it is silently left out. Declare a model litellm does not know with
``litellm.register_model({"openai/my-model": {"supports_response_schema": True, ...}})``.

``stream_step`` makes the same call with ``stream=True`` (asking for usage in the last
chunk), reports each text, reasoning and tool-call-argument piece to ``on_delta`` as the
chunks arrive, and builds the whole answer from the chunks with litellm's
``stream_chunk_builder``: the result and usage are those ``generate_step`` would return.
A failure before or during the stream (a connection that breaks mid-stream too) raises
the same errors as ``generate_step``.

litellm is imported on the first call, not when ``helix_dbos`` is imported. Before that
import the adapter sets ``LITELLM_LOCAL_MODEL_COST_MAP=True`` and
``LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS=True`` (unless already set) so litellm uses its
bundled price and header tables instead of fetching them from GitHub, turns off its
telemetry where the installed version has it, and sets ``suppress_debug_info`` so
failed calls do not print litellm's help banner to stdout.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import time
from types import ModuleType
from typing import Any

from pydantic import BaseModel

from helix_dbos._deltas import Delta, DeltaSink
from helix_dbos.llm.base import PermanentLLMError
from helix_dbos.llm.litellm_errors import classify_litellm_error
from helix_dbos.llm.litellm_response import parse_completion
from helix_dbos.llm.openai_format import to_openai_messages, to_openai_tool_choice, to_openai_tools
from helix_dbos.types import FINISH_TOOL_NAME, LLMConfig, Message, StepResult, ToolSpec, Usage

_OFFLINE_ENVIRONMENT = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS": "True",
}
# Providers whose litellm translation takes signed thinking blocks back on assistant turns.
_THINKING_ROUND_TRIP_PROVIDERS = frozenset({"anthropic", "bedrock", "vertex_ai"})


class LiteLLMAdapter:
    """Calls ``litellm.acompletion``; ``default_kwargs`` go to every call (``api_base``, ``api_key``, ...).

    Args:
        **default_kwargs: Keyword arguments of every ``litellm.acompletion`` call; an
            agent's ``llm_config.extra`` overrides them.
    """

    def __init__(self, **default_kwargs: Any) -> None:
        self.default_kwargs = default_kwargs

    async def generate_step(
        self,
        messages: list[Message],
        tools: list[ToolSpec],
        llm_config: LLMConfig,
        output_schema: type[BaseModel] | None = None,
    ) -> tuple[StepResult, Usage]:
        """One model call.

        Args:
            messages: The conversation, starting with the system message.
            tools: Everything the model may call.
            llm_config: The model (a litellm model string) and its settings.
            output_schema: Unused: agents finish through the ``__finish__`` tool.

        Returns:
            What the model answered, and the call's usage.

        Raises:
            TransientLLMError: A rate limit, timeout, 5xx or connection error.
            PermanentLLMError: Any other failure (authentication, a bad request, ...).
        """
        litellm = load_litellm()
        request = self._build_request(litellm, messages, tools, llm_config)
        started = time.perf_counter()
        try:
            response = await litellm.acompletion(**request)
        except Exception as exc:
            raise classify_litellm_error(exc) from exc
        latency_ms = (time.perf_counter() - started) * 1000
        if not response.choices:
            raise PermanentLLMError(f"{llm_config.model} returned no choices", error_type="EmptyResponse")
        return parse_completion(response), _usage(litellm, response, latency_ms)

    async def stream_step(
        self,
        messages: list[Message],
        tools: list[ToolSpec],
        llm_config: LLMConfig,
        output_schema: type[BaseModel] | None,
        on_delta: DeltaSink,
    ) -> tuple[StepResult, Usage]:
        """One streamed model call; ``on_delta`` gets the pieces as they arrive.

        Args:
            messages: The conversation, starting with the system message.
            tools: Everything the model may call.
            llm_config: The model (a litellm model string) and its settings.
            output_schema: Unused: agents finish through the ``__finish__`` tool.
            on_delta: Receives each text, reasoning or tool-call-argument piece in order.

        Returns:
            What the model answered, and the call's usage.

        Raises:
            TransientLLMError: A rate limit, timeout, 5xx or connection error.
            PermanentLLMError: Any other failure, of the call or of the stream.
        """
        litellm = load_litellm()
        request = self._build_request(litellm, messages, tools, llm_config)
        request.update(stream=True, stream_options={"include_usage": True})
        started = time.perf_counter()
        chunks: list[Any] = []
        calls: dict[int, tuple[str | None, str | None]] = {}
        try:
            stream = await litellm.acompletion(**request)
            async for chunk in stream:
                chunks.append(chunk)
                for delta in _chunk_deltas(chunk, calls):
                    on_delta(delta)
        except Exception as exc:
            raise classify_litellm_error(exc) from exc
        latency_ms = (time.perf_counter() - started) * 1000
        response = litellm.stream_chunk_builder(chunks, messages=request["messages"]) if chunks else None
        if response is None or not response.choices:
            raise PermanentLLMError(f"{llm_config.model} returned no choices", error_type="EmptyResponse")
        return parse_completion(response), _usage(litellm, response, latency_ms)

    def _build_request(
        self, litellm: ModuleType, messages: list[Message], tools: list[ToolSpec], llm_config: LLMConfig
    ) -> dict[str, Any]:
        """The keyword arguments for ``litellm.acompletion``."""
        request: dict[str, Any] = {**self.default_kwargs, **llm_config.extra, "model": llm_config.model}
        provider = _provider(litellm, llm_config.model, request.get("custom_llm_provider"))
        request["messages"] = to_openai_messages(messages, send_thinking=provider in _THINKING_ROUND_TRIP_PROVIDERS)
        if tools:
            strict_names = _strict_tool_names(litellm, tools, llm_config, request.get("custom_llm_provider"))
            request["tools"] = to_openai_tools(tools, strict_names)
            if llm_config.tool_choice is not None:
                request["tool_choice"] = to_openai_tool_choice(llm_config.tool_choice)
        if llm_config.temperature is not None:
            request["temperature"] = llm_config.temperature
        if llm_config.max_tokens is not None:
            request["max_tokens"] = llm_config.max_tokens
        request.update(num_retries=0, max_retries=0, **_skip_mcp_gateway())
        return request


@functools.cache
def load_litellm() -> ModuleType:
    """Import and configure litellm once, keeping it offline (see the module docstring)."""
    for name, value in _OFFLINE_ENVIRONMENT.items():
        os.environ.setdefault(name, value)
    import litellm

    if hasattr(litellm, "telemetry"):  # older litellm versions have an opt-out telemetry flag
        litellm.telemetry = False
    litellm.suppress_debug_info = True
    return litellm


@functools.cache
def _skip_mcp_gateway() -> dict[str, bool]:
    """litellm versions with an MCP gateway on chat completions route every call that has
    tools through it, which imports the optional ``mcp`` package and fails without it. We
    never send MCP tools, so skip it where that code exists (older versions lack the flag)."""
    if importlib.util.find_spec("litellm.responses.mcp.chat_completions_handler") is None:
        return {}
    return {"_skip_mcp_handler": True}


def _chunk_deltas(chunk: Any, calls: dict[int, tuple[str | None, str | None]]) -> list[Delta]:
    """The pieces of one streamed chunk; ``calls`` remembers each tool call's id and name
    by index (providers send them with the call's first fragment only)."""
    choices = getattr(chunk, "choices", None) or []
    delta = getattr(choices[0], "delta", None) if choices else None
    if delta is None:
        return []
    found: list[Delta] = []
    reasoning = getattr(delta, "reasoning_content", None)
    if reasoning:
        found.append(Delta(kind="reasoning", text=reasoning))
    if getattr(delta, "content", None):
        found.append(Delta(kind="text", text=delta.content))
    for position, call in enumerate(getattr(delta, "tool_calls", None) or []):
        index = call.index if isinstance(getattr(call, "index", None), int) else position
        function = getattr(call, "function", None)
        known_id, known_name = calls.get(index, (None, None))
        calls[index] = (getattr(call, "id", None) or known_id, getattr(function, "name", None) or known_name)
        arguments = getattr(function, "arguments", None)
        if arguments:
            call_id, name = calls[index]
            found.append(Delta(kind="tool_call", text=arguments, tool_call_id=call_id, tool_name=name, tool_index=index))
    return found


def _provider(litellm: ModuleType, model: str, custom_llm_provider: str | None) -> str | None:
    try:
        _, provider, _, _ = litellm.get_llm_provider(model=model, custom_llm_provider=custom_llm_provider)
    except Exception:  # unknown provider: the call itself will report it
        return None
    return provider if isinstance(provider, str) else None


def _strict_tool_names(
    litellm: ModuleType, tools: list[ToolSpec], llm_config: LLMConfig, custom_llm_provider: str | None
) -> set[str]:
    """Tools that asked for strict mode, if the model supports it (else none)."""
    wanted = {
        tool.name for tool in tools if tool.strict or (tool.name == FINISH_TOOL_NAME and llm_config.strict_output)
    }
    if not wanted:
        return set()
    capable = litellm.supports_response_schema(model=llm_config.model, custom_llm_provider=custom_llm_provider)
    return wanted if capable else set()


def _usage(litellm: ModuleType, response: Any, latency_ms: float) -> Usage:
    usage = getattr(response, "usage", None)
    input_tokens = getattr(usage, "prompt_tokens", None) or 0
    output_tokens = getattr(usage, "completion_tokens", None) or 0
    total_tokens = getattr(usage, "total_tokens", None) or input_tokens + output_tokens
    return Usage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        total_tokens=total_tokens,
        cost_usd=_cost(litellm, response),
        latency_ms=latency_ms,
    )


def _cost(litellm: ModuleType, response: Any) -> float | None:
    """Price from litellm's bundled table (no network); ``None`` for models it cannot price."""
    try:
        return float(litellm.completion_cost(completion_response=response))
    except Exception:
        return None
