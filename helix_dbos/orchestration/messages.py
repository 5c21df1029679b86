"""Build the messages of the conversation history.

Builders return new objects and never mutate their inputs, so every step's history is
a fresh list and earlier ones stay stable::

    >>> create_tool_result_message("tc1", "search", {"items": ["a", "b"]}).content
    '{"items":["a","b"]}'
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from helix_dbos.types import (
    SUB_AGENT_TOOL_PREFIX,
    AssistantMessage,
    Message,
    ParsedSubAgentCall,
    ParsedToolCall,
    SystemMessage,
    ToolResultMessage,
)

from .plans import AssistantMessagePlan
from .prompts import SystemPrompt, resolve_system_prompt
from .validation import to_json_value


def json_stringify(value: Any) -> str:
    """Compact JSON like JavaScript's ``JSON.stringify``: no spaces, non-ASCII kept.

    Args:
        value: Any JSON-able value.

    Returns:
        The JSON text.

    Examples:
        >>> json_stringify({"a": [1, 2], "b": "é"})
        '{"a":[1,2],"b":"é"}'
    """
    return json.dumps(to_json_value(value), separators=(",", ":"), ensure_ascii=False)


def sub_agent_call_as_tool_call(call: ParsedSubAgentCall) -> ParsedToolCall:
    """A sub-agent call as stored in history: a ``subagent__<agent_type>`` tool call.

    Args:
        call: The sub-agent call.

    Returns:
        The tool call.

    Examples:
        >>> sub_agent_call_as_tool_call(ParsedSubAgentCall(id="s1", agent_type="summarizer")).name
        'subagent__summarizer'
    """
    return ParsedToolCall(
        id=call.id, name=f"{SUB_AGENT_TOOL_PREFIX}{call.agent_type}", arguments=call.input
    )


def create_assistant_message(plan: AssistantMessagePlan) -> AssistantMessage:
    """The assistant message of a step: tool calls first, then sub-agent calls as tool calls.

    Args:
        plan: The step's assistant message plan.

    Returns:
        The assistant message.

    Examples:
        >>> msg = create_assistant_message(AssistantMessagePlan(
        ...     tool_calls=[ParsedToolCall(id="t1", name="search", arguments={})],
        ...     sub_agent_calls=[ParsedSubAgentCall(id="s1", agent_type="summarizer", input={})],
        ... ))
        >>> [call.name for call in msg.tool_calls]
        ['search', 'subagent__summarizer']
    """
    return AssistantMessage(
        content=plan.content,
        tool_calls=[
            *(call.model_copy(deep=True) for call in plan.tool_calls),
            *(sub_agent_call_as_tool_call(call) for call in plan.sub_agent_calls),
        ],
        thinking=plan.thinking,
    )


def create_tool_result_message(
    tool_call_id: str,
    tool_name: str,
    result: Any = None,
    success: bool = True,
    error: str | None = None,
) -> ToolResultMessage:
    """The result of one tool call. A success carries the JSON-stringified ``result``;
    a failure carries the ``error`` text and ``is_error=True``.

    Args:
        tool_call_id: The call's id.
        tool_name: The tool's name.
        result: The tool's output, when it succeeded.
        success: Whether the call succeeded.
        error: The error text, when it failed.

    Returns:
        The tool result message.

    Examples:
        >>> create_tool_result_message("tc1", "search", success=False, error="boom").content
        'boom'
    """
    if success:
        return ToolResultMessage(
            tool_call_id=tool_call_id, tool_name=tool_name, content=json_stringify(result)
        )
    return ToolResultMessage(
        tool_call_id=tool_call_id,
        tool_name=tool_name,
        content=error if error is not None else "Tool execution failed",
        is_error=True,
    )


def create_sub_agent_result_message(
    tool_call_id: str,
    agent_type: str,
    result: Any = None,
    success: bool = True,
    error: str | None = None,
) -> ToolResultMessage:
    """Like :func:`create_tool_result_message`, named ``subagent__<agent_type>``.

    Args:
        tool_call_id: The call's id.
        agent_type: The child agent's name.
        result: The child's output, when it succeeded.
        success: Whether the child succeeded.
        error: The error text, when it failed.

    Returns:
        The tool result message.

    Examples:
        >>> create_sub_agent_result_message("s1", "summarizer", {"summary": "..."}).tool_name
        'subagent__summarizer'
    """
    return create_tool_result_message(
        tool_call_id, f"{SUB_AGENT_TOOL_PREFIX}{agent_type}", result, success, error
    )


def build_messages_for_llm(
    messages: Sequence[Message], system_prompt: SystemPrompt, custom_state: Any
) -> list[Message]:
    """The messages to send to the model: the resolved system prompt, then the history.

    Args:
        messages: The session's transcript.
        system_prompt: Text, or a function of the custom state returning it.
        custom_state: The session's custom state.

    Returns:
        The system message, then the transcript.

    Examples:
        >>> built = build_messages_for_llm([], lambda s: f"You have {len(s['notes'])} notes.",
        ...                                {"notes": [1, 2, 3, 4, 5]})
        >>> built[0].content
        'You have 5 notes.'
    """
    system = SystemMessage(content=resolve_system_prompt(system_prompt, custom_state))
    return [system, *messages]


def unpaired_tool_call_ids(messages: Sequence[Message]) -> list[str]:
    """Ids of assistant tool calls that no tool result message answers, in history order.

    Args:
        messages: A transcript.

    Returns:
        The ids of the calls without a result.
    """
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolResultMessage)}
    return [
        call.id
        for message in messages
        if isinstance(message, AssistantMessage)
        for call in message.tool_calls
        if call.id not in answered
    ]
