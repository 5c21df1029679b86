"""What ``POST /chat`` takes from the AI SDK's request: only what is new.

``DefaultChatTransport`` posts the client's whole chat (``id``, ``messages``, ``trigger``,
``messageId``, plus what the app adds, such as ``agent``). The session's transcript is
the truth, so the server reads just the last message: a user message is the next turn's
input; an assistant message carries the answers its tool parts hold (an approval
decision, a client tool's output or error) for the calls the session waits on::

    >>> last = {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "Hi"}]}
    >>> user_text(last)
    'Hi'
    >>> approval = {"type": "tool-refund", "toolCallId": "c1", "state": "approval-responded",
    ...             "approval": {"id": "c1", "approved": False, "reason": "too much"}}
    >>> answers({"role": "assistant", "parts": [approval]}, {"c1": "approval"}, approver="ana")
    [ApprovalResponse(tool_call_id='c1', approved=False, reason='too much', approver='ana')]
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from helix_dbos.answers import ApprovalResponse, ClientToolResult, ToolAnswer


class ChatRequest(BaseModel):
    """The body of ``POST /chat`` (fields the transport or the app add are ignored)."""

    model_config = ConfigDict(extra="ignore")

    id: str
    """The chat's id: the session's id."""
    messages: list[dict[str, Any]]
    trigger: Literal["submit-message", "regenerate-message"] = "submit-message"
    messageId: str | None = None
    agent: str | None = None
    """The agent of a new chat (default: the server's ``chat_agent``)."""


def user_text(message: dict[str, Any]) -> str:
    """The text of a user message: its text parts, joined by blank lines."""
    texts = [str(part.get("text", "")) for part in message.get("parts") or [] if part.get("type") == "text"]
    return "\n\n".join(text for text in texts if text)


def tool_parts(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool parts of a UI message (``tool-<name>`` and ``dynamic-tool``)."""
    return [
        part for part in message.get("parts") or []
        if str(part.get("type", "")).startswith("tool-") or part.get("type") == "dynamic-tool"
    ]


def answers(message: dict[str, Any], waiting: dict[str, str], approver: str | None) -> list[ToolAnswer]:
    """The answers an assistant message holds for the calls in ``waiting`` (call id ->
    ``approval`` or ``client``); parts of other calls are ignored."""
    found: list[ToolAnswer] = []
    for part in tool_parts(message):
        call_id, kind, state = part.get("toolCallId"), waiting.get(str(part.get("toolCallId"))), part.get("state")
        if kind == "approval" and isinstance(part.get("approval"), dict) and "approved" in part["approval"]:
            decision = part["approval"]
            found.append(ApprovalResponse(
                tool_call_id=str(call_id), approved=bool(decision["approved"]), reason=decision.get("reason"), approver=approver,
            ))
        elif kind == "client" and state == "output-available":
            found.append(ClientToolResult(tool_call_id=str(call_id), result=part.get("output")))
        elif kind == "client" and state == "output-error":
            found.append(ClientToolResult(tool_call_id=str(call_id), error=str(part.get("errorText") or "the client tool failed")))
    return found


def answered_calls(message: dict[str, Any]) -> list[str]:
    """The ids of the calls whose tool parts hold an answer or an output."""
    return [
        str(part.get("toolCallId")) for part in tool_parts(message)
        if part.get("state") in ("approval-responded", "output-available", "output-error", "output-denied")
    ]

