"""Reading a litellm ``ModelResponse`` (OpenAI chat shape, any provider) into a ``StepResult``.

    result = parse_completion(response)   # TextStepResult or ToolCallsStepResult

Rules:

* tool calls present -> ``ToolCallsStepResult`` (decided by the calls, not by the finish
  reason: some providers say ``stop`` with a call pending); calls named
  ``subagent__<type>`` go to ``sub_agent_calls``, all others to ``tool_calls``;
* arguments that are not valid JSON become a ``ParsedToolCall`` with ``parse_error`` set
  and the raw text in ``arguments`` (a malformed ``subagent__`` call too, since a
  ``ParsedSubAgentCall`` cannot carry an error), so the runtime answers it with an error;
* no tool calls -> ``TextStepResult`` with ``should_stop=True``: the model ended its turn;
  ``stop_reason`` says why, and the orchestration core decides whether that is success,
  failure, or (``max_tokens`` with an output schema) a recoverable nudge;
* an OpenAI refusal (``message.refusal``) is a text answer with ``stop_reason="refusal"``;
* ``reasoning_content`` becomes ``ThinkingContent``; its signature is kept when the
  provider returned exactly one signed thinking block.
"""

from __future__ import annotations

import json
from typing import Any

from helix_dbos.types import (
    SUB_AGENT_TOOL_PREFIX,
    ParsedSubAgentCall,
    ParsedToolCall,
    StepResult,
    StopReason,
    TextStepResult,
    ThinkingContent,
    ToolCallsStepResult,
)

_STOP_REASONS: dict[str, StopReason] = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "content_filter",
    "refusal": "refusal",
}


def map_finish_reason(finish_reason: str | None) -> StopReason:
    """OpenAI finish reason (litellm normalises every provider to these) -> our stop reason.

    >>> map_finish_reason("length")
    'max_tokens'
    """
    return _STOP_REASONS.get(finish_reason or "", "unknown")


def parse_completion(response: Any) -> StepResult:
    """The first choice of a litellm ``ModelResponse`` as a step result."""
    choice = response.choices[0]
    message = choice.message
    stop_reason = map_finish_reason(choice.finish_reason)
    thinking = _thinking(message)
    raw_calls = getattr(message, "tool_calls", None) or []
    if raw_calls:
        tool_calls, sub_agent_calls = _split_calls(raw_calls)
        return ToolCallsStepResult(
            content=message.content or None,
            tool_calls=tool_calls,
            sub_agent_calls=sub_agent_calls,
            thinking=thinking,
            stop_reason=stop_reason,
        )
    refusal = _refusal(message)
    if refusal:
        return TextStepResult(content=refusal, thinking=thinking, should_stop=True, stop_reason="refusal")
    return TextStepResult(content=message.content or "", thinking=thinking, should_stop=True, stop_reason=stop_reason)


def _split_calls(raw_calls: list[Any]) -> tuple[list[ParsedToolCall], list[ParsedSubAgentCall]]:
    tool_calls: list[ParsedToolCall] = []
    sub_agent_calls: list[ParsedSubAgentCall] = []
    for index, raw in enumerate(raw_calls):
        call = parse_tool_call(raw.id or f"call_{index}", raw.function.name, raw.function.arguments)
        if call.name.startswith(SUB_AGENT_TOOL_PREFIX) and call.parse_error is None:
            agent_type = call.name[len(SUB_AGENT_TOOL_PREFIX) :]
            sub_agent_calls.append(ParsedSubAgentCall(id=call.id, agent_type=agent_type, input=call.arguments))
        else:
            tool_calls.append(call)
    return tool_calls, sub_agent_calls


def parse_tool_call(call_id: str, name: str, raw_arguments: str | None) -> ParsedToolCall:
    """Parse one call's JSON arguments; empty means ``{}``, invalid JSON sets ``parse_error``.

    >>> parse_tool_call("t1", "search", '{"q": ').parse_error is not None
    True
    """
    if not raw_arguments or not raw_arguments.strip():
        return ParsedToolCall(id=call_id, name=name, arguments={})
    try:
        return ParsedToolCall(id=call_id, name=name, arguments=json.loads(raw_arguments))
    except json.JSONDecodeError as error:
        return ParsedToolCall(
            id=call_id, name=name, arguments=raw_arguments, parse_error=f"invalid JSON arguments: {error}"
        )


def _thinking(message: Any) -> ThinkingContent | None:
    text = getattr(message, "reasoning_content", None)
    if not text:
        return None
    blocks = getattr(message, "thinking_blocks", None) or []
    signature = blocks[0].get("signature") if len(blocks) == 1 else None
    return ThinkingContent(content=text, signature=signature or None)


def _refusal(message: Any) -> str | None:
    fields = getattr(message, "provider_specific_fields", None) or {}
    return fields.get("refusal") or getattr(message, "refusal", None)
