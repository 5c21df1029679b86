"""What an MCP tool call answered, as the portable JSON a tool step records::

    result_json(call_result)
    # {"content": [{"type": "text", "text": "3"}], "structured": {"result": 3}}

``content`` holds the result's content blocks as the protocol spells them (text, images
and audio with their base64 ``data`` and ``mimeType``, resource links, embedded
resources), without their ``_meta``; ``structured`` is the tool's ``structuredContent``,
when it sent one. A result with ``isError`` is no result: :func:`result_json` raises
:class:`MCPToolError` with the text the tool sent, and the model sees it as the call's
error.
"""

from __future__ import annotations

import json
from typing import Any

from mcp_types import CallToolResult, TextContent


class MCPToolError(Exception):
    """An MCP tool answered with ``isError``: its message is what the tool said."""


def result_json(result: CallToolResult) -> dict[str, Any]:
    """The call's answer as portable JSON; raises :class:`MCPToolError` for an error result."""
    content = [block.model_dump(mode="json", by_alias=True, exclude_none=True, exclude={"meta"}) for block in result.content]
    if result.is_error:
        raise MCPToolError(error_text(result, content))
    answer: dict[str, Any] = {"content": content}
    if result.structured_content is not None:
        answer["structured"] = result.structured_content
    return answer


def error_text(result: CallToolResult, content: list[dict[str, Any]]) -> str:
    """What an error result says: its text blocks, else its content as JSON."""
    texts = [block.text for block in result.content if isinstance(block, TextContent)]
    if texts:
        return "\n".join(texts)
    return json.dumps(content) if content else "the tool reported an error"
