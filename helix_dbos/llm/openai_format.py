"""Our messages and tool specs in the OpenAI chat format that litellm accepts for every provider.

    >>> to_openai_messages([UserMessage(content="hi")])
    [{'role': 'user', 'content': 'hi'}]
    >>> to_openai_tools([ToolSpec(name="search")], strict_names=set())[0]["function"]["name"]
    'search'

litellm translates this format to each provider's own (Anthropic ``tool_use`` and
``tool_result`` blocks, Gemini function calls, ...).
"""

from __future__ import annotations

import copy
import json
from typing import Any

from helix_dbos.types import (
    AssistantMessage,
    Message,
    ParsedToolCall,
    SystemMessage,
    ThinkingContent,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)

OpenAIMessage = dict[str, Any]


def to_openai_messages(messages: list[Message], send_thinking: bool = False) -> list[OpenAIMessage]:
    """Convert a conversation. ``send_thinking`` adds signed reasoning back to assistant turns
    (Anthropic needs it to continue a tool-use turn with extended thinking on)."""
    return [_to_openai_message(message, send_thinking) for message in messages]


def _to_openai_message(message: Message, send_thinking: bool) -> OpenAIMessage:
    if isinstance(message, (SystemMessage, UserMessage)):
        return {"role": message.role, "content": message.content}
    if isinstance(message, ToolResultMessage):
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    return _assistant_message(message, send_thinking)


def _assistant_message(message: AssistantMessage, send_thinking: bool) -> OpenAIMessage:
    result: OpenAIMessage = {"role": "assistant", "content": message.content}
    if message.tool_calls:
        result["tool_calls"] = [_tool_call(call) for call in message.tool_calls]
    if send_thinking and message.thinking is not None and message.thinking.signature:
        result["thinking_blocks"] = [_thinking_block(message.thinking)]
    return result


def _tool_call(call: ParsedToolCall) -> OpenAIMessage:
    # A call whose JSON did not parse is replayed as "{}": its raw text is not valid JSON,
    # and providers such as Anthropic reject a tool_use whose input is not an object.
    arguments = (
        "{}" if call.parse_error is not None else json.dumps(call.arguments if call.arguments is not None else {})
    )
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": arguments}}


def _thinking_block(thinking: ThinkingContent) -> dict[str, str | None]:
    return {"type": "thinking", "thinking": thinking.content, "signature": thinking.signature}


def to_openai_tools(tools: list[ToolSpec], strict_names: set[str]) -> list[dict[str, Any]]:
    """Function definitions; tools named in ``strict_names`` get ``"strict": true``."""
    return [_function_definition(tool, tool.name in strict_names) for tool in tools]


def _function_definition(tool: ToolSpec, strict: bool) -> dict[str, Any]:
    function: dict[str, Any] = {"name": tool.name, "parameters": copy.deepcopy(tool.parameters)}  # the agent's own
    if tool.description:
        function["description"] = tool.description
    if strict:
        function["strict"] = True
    return {"type": "function", "function": function}


def to_openai_tool_choice(tool_choice: str) -> str | dict[str, Any]:
    """``auto`` / ``required`` / ``none`` pass through; any other value names the one tool to call."""
    if tool_choice in ("auto", "required", "none"):
        return tool_choice
    return {"type": "function", "function": {"name": tool_choice}}
