"""``MockLLMAdapter``: a scripted model for tests, deterministic and picklable.

Queue answers in order (step results, or dicts of their fields, snake_case or camelCase)::

    mock = MockLLMAdapter()
    mock.add_response({"type": "tool_calls", "toolCalls": [{"id": "t1", "name": "search", "arguments": {"q": "x"}}]})
    mock.add_response({"type": "text", "content": "done", "shouldStop": True})
    ...  # run the agent
    assert [t.name for t in mock.get_last_input().tools] == ["search"]

or compute each answer from the conversation with a responder::

    def respond(messages, tools):                 # module level, so the mock stays picklable
        return {"content": f"{len(messages)} messages so far", "shouldStop": True}

    mock = MockLLMAdapter(respond)

Queued answers come first, then the responder, then ``default_response``; when all are
missing the call raises :class:`MockExhaustedError` (a ``PermanentLLMError``, so under
``generate_with_retry`` the run fails with its message). ``add_error`` queues an
exception instead, e.g. a ``TransientLLMError`` to exercise retries.

Usage is deterministic unless you pass one: roughly four characters per token of the
JSON of the messages (input) and of the answer (output), no cost, and
``latency_ms = delay_seconds * 1000``. A dict without ``type`` is typed by its keys:
``tool_calls``/``sub_agent_calls`` -> tool calls, ``output`` -> structured output,
``error`` -> error, otherwise text.

The mock streams too (``stream_step``): the same answer, then its pieces as deltas,
``stream_chunk_chars`` characters each and ``delta_delay_seconds`` apart.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from helix_dbos._deltas import Delta, DeltaSink
from helix_dbos.llm.base import LLMError, PermanentLLMError
from helix_dbos.types import SUB_AGENT_TOOL_PREFIX, LLMConfig, Message, MessageListAdapter, StepResult, StepResultAdapter, ToolSpec, Usage

Responder = Callable[[list[Message], list[ToolSpec]], StepResult | dict[str, Any]]
"""Computes the next answer from the conversation and the offered tools."""

_SNAKE_CASE = {
    "toolCalls": "tool_calls",
    "subAgentCalls": "sub_agent_calls",
    "shouldStop": "should_stop",
    "stopReason": "stop_reason",
    "errorType": "error_type",
    "agentType": "agent_type",
    "parseError": "parse_error",
}


class MockExhaustedError(PermanentLLMError):
    """The mock was called with no queued answer, no responder and no default."""


@dataclass(frozen=True)
class LLMInput:
    """What the mock received on one call (copies, safe from later mutation).

    Attributes:
        messages: The conversation the mock received.
        tools: The tools it was offered.
        llm_config: The model settings.
        output_schema: The agent's output type, or None.
    """

    messages: list[Message]
    tools: list[ToolSpec]
    llm_config: LLMConfig
    output_schema: type[BaseModel] | None = None


class MockLLMAdapter:
    """A scripted :class:`~helix_dbos.llm.LLMAdapter`; ``inputs`` records every call in order.

    Args:
        responder: Computes an answer from the conversation and the offered tools, when no
            answer is queued.
        default_response: The answer when none is queued and there is no responder.
        delay_seconds: Seconds each call takes.
        stream_chunk_chars: Characters of each streamed piece (at least 1).
        delta_delay_seconds: Seconds between streamed pieces.

    Raises:
        ValueError: ``stream_chunk_chars`` is below 1.
    """

    def __init__(
        self,
        responder: Responder | None = None,
        *,
        default_response: StepResult | dict[str, Any] | None = None,
        delay_seconds: float = 0.0,
        stream_chunk_chars: int = 16,
        delta_delay_seconds: float = 0.0,
    ) -> None:
        if stream_chunk_chars < 1:
            raise ValueError(f"stream_chunk_chars must be at least 1, got {stream_chunk_chars}")
        self.responder = responder
        self.stream_chunk_chars = stream_chunk_chars
        self.delta_delay_seconds = delta_delay_seconds
        self.default_response = None if default_response is None else to_step_result(default_response)
        self.delay_seconds = delay_seconds
        self.inputs: list[LLMInput] = []
        self._queue: list[tuple[StepResult | LLMError, Usage | None]] = []

    def add_response(self, response: StepResult | dict[str, Any], usage: Usage | None = None) -> None:
        """Queue the next answer, with the usage to report for it (default: computed).

        Args:
            response: A step result, or a dict of one (snake_case or camelCase keys; without
                ``type``, typed by its keys).
            usage: The usage to report; default computed from the characters.
        """
        self._queue.append((to_step_result(response), usage))

    def add_error(self, error: LLMError) -> None:
        """Queue an exception to raise instead of answering.

        Args:
            error: The exception, e.g. a :class:`~helix_dbos.llm.TransientLLMError`.
        """
        self._queue.append((error, None))

    @property
    def pending(self) -> int:
        """How many queued answers (and errors) have not been used yet."""
        return len(self._queue)

    def get_last_input(self) -> LLMInput:
        """The most recent call's input.

        Returns:
            What the mock received on its latest call.

        Raises:
            LookupError: The mock has not been called yet.
        """
        if not self.inputs:
            raise LookupError("MockLLMAdapter has not been called yet")
        return self.inputs[-1]

    async def generate_step(
        self,
        messages: list[Message],
        tools: list[ToolSpec],
        llm_config: LLMConfig,
        output_schema: type[BaseModel] | None = None,
    ) -> tuple[StepResult, Usage]:
        """The next queued answer, else the responder's, else the default.

        Args:
            messages: The conversation, starting with the system message.
            tools: Everything the model may call.
            llm_config: The model and its settings (recorded, otherwise unused).
            output_schema: The agent's output type (recorded, otherwise unused).

        Returns:
            The answer, and its usage.

        Raises:
            LLMError: The queued error.
            MockExhaustedError: No answer is queued and there is no responder or default.
        """
        self.inputs.append(_record(messages, tools, llm_config, output_schema))
        if self.delay_seconds > 0:
            await asyncio.sleep(self.delay_seconds)
        result, usage = self._next(messages, tools)
        return result, usage or self._default_usage(messages, result)

    async def stream_step(
        self,
        messages: list[Message],
        tools: list[ToolSpec],
        llm_config: LLMConfig,
        output_schema: type[BaseModel] | None,
        on_delta: DeltaSink,
    ) -> tuple[StepResult, Usage]:
        """``generate_step``, then the answer's pieces to ``on_delta`` (reasoning, text,
        each tool call's compact JSON arguments), ``stream_chunk_chars`` characters each,
        ``delta_delay_seconds`` apart. A queued error is raised before any piece.

        Args:
            messages: The conversation, starting with the system message.
            tools: Everything the model may call.
            llm_config: The model and its settings (recorded, otherwise unused).
            output_schema: The agent's output type (recorded, otherwise unused).
            on_delta: Receives each piece in order.

        Returns:
            The answer, and its usage.

        Raises:
            LLMError: The queued error.
            MockExhaustedError: No answer is queued and there is no responder or default.
        """
        result, usage = await self.generate_step(messages, tools, llm_config, output_schema)
        for number, delta in enumerate(stream_pieces(result, self.stream_chunk_chars)):
            if number and self.delta_delay_seconds > 0:
                await asyncio.sleep(self.delta_delay_seconds)
            on_delta(delta)
        return result, usage

    def _next(self, messages: list[Message], tools: list[ToolSpec]) -> tuple[StepResult, Usage | None]:
        if self._queue:
            answer, usage = self._queue.pop(0)
            if isinstance(answer, LLMError):
                raise answer
            return answer, usage
        if self.responder is not None:
            return to_step_result(self.responder(messages, tools)), None
        if self.default_response is not None:
            return self.default_response.model_copy(deep=True), None
        raise MockExhaustedError(
            f"MockLLMAdapter has no response for call #{len(self.inputs)}: "
            "queue one with add_response(), or pass a responder or default_response"
        )

    def _default_usage(self, messages: list[Message], result: StepResult) -> Usage:
        input_tokens = len(MessageListAdapter.dump_json(messages)) // 4
        output_tokens = _json_length(result.model_dump(mode="json")) // 4
        return Usage(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            total_tokens=input_tokens + output_tokens,
            latency_ms=self.delay_seconds * 1000,
        )


def to_step_result(response: StepResult | dict[str, Any]) -> StepResult:
    """Validate a step result given as a model or as a dict (snake_case or camelCase keys).

    >>> to_step_result({"content": "hi", "shouldStop": True}).should_stop
    True
    """
    if isinstance(response, BaseModel):
        return StepResultAdapter.validate_python(response.model_dump())
    data = _snake_keys(response)
    for key in ("tool_calls", "sub_agent_calls"):
        if key in data:
            data[key] = [_snake_keys(call) if isinstance(call, dict) else call for call in data[key]]
    data.setdefault("type", _infer_type(data))
    return StepResultAdapter.validate_python(data)


def stream_pieces(result: StepResult, size: int) -> list[Delta]:
    """The deltas a streaming model would have sent for ``result``, ``size`` characters each.

    >>> [d.text for d in stream_pieces(to_step_result({"content": "abcde"}), 2)]
    ['ab', 'cd', 'e']
    """
    thinking = getattr(result, "thinking", None)
    pieces = [Delta(kind="reasoning", text=part) for part in _cut(thinking.content if thinking else "", size)]
    pieces += [Delta(kind="text", text=part) for part in _cut(getattr(result, "content", None) or "", size)]
    calls = [*getattr(result, "tool_calls", []), *getattr(result, "sub_agent_calls", [])]
    for index, call in enumerate(calls):
        name = getattr(call, "name", None) or f"{SUB_AGENT_TOOL_PREFIX}{getattr(call, 'agent_type', '')}"
        raw = getattr(call, "arguments", getattr(call, "input", None))
        arguments = raw if isinstance(raw, str) else json.dumps(raw, separators=(",", ":"), ensure_ascii=False)
        pieces += [
            Delta(kind="tool_call", text=part, tool_call_id=call.id, tool_name=name, tool_index=index)
            for part in _cut(arguments, size)
        ]
    return pieces


def _cut(text: str, size: int) -> list[str]:
    return [text[start : start + size] for start in range(0, len(text), size)]


def _snake_keys(data: dict[str, Any]) -> dict[str, Any]:
    return {_SNAKE_CASE.get(key, key): value for key, value in data.items()}


def _infer_type(data: dict[str, Any]) -> str:
    if "tool_calls" in data or "sub_agent_calls" in data:
        return "tool_calls"
    if "output" in data:
        return "structured_output"
    if "error" in data:
        return "error"
    return "text"


def _record(
    messages: list[Message], tools: list[ToolSpec], llm_config: LLMConfig, output_schema: type[BaseModel] | None
) -> LLMInput:
    return LLMInput(
        messages=[message.model_copy(deep=True) for message in messages],
        tools=[tool.model_copy(deep=True) for tool in tools],
        llm_config=llm_config.model_copy(deep=True),
        output_schema=output_schema,
    )


def _json_length(value: Any) -> int:
    """Characters of ``value`` as compact JSON (pydantic's ``dump_json`` fails on a lone
    surrogate, which a scripted model may send on purpose)."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False))
