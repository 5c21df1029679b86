"""What the routes accept: JSON bodies and query parameters, validated with pydantic
(unknown fields are refused, so a typo is a 422, not a silent default)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from helix_dbos.answers import ApprovalResponse, ClientToolResult, ToolAnswer


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StartBody(_Strict):
    """``POST /start``: a new session, or a new turn of a session that is not running."""

    agent: str
    input: Any
    """The user message: a string, or any JSON value (sent as JSON text)."""
    session_id: str | None = None
    queue: str | None = None
    """A DBOS queue to run on (default: the executor's ``default_queue``)."""


class ResumeBody(_Strict):
    """``POST /resume``: continue an interrupted, failed or aborted session."""

    session_id: str
    agent: str | None = None
    """Default: the agent the session ran."""


class SessionBody(_Strict):
    """``POST /interrupt``."""

    session_id: str


class AbortBody(SessionBody):
    """``POST /abort``."""

    reason: str = "aborted"


class SubmitBody(_Strict):
    """``POST /submit-tool-result``: an approval decision (``approved``, optional
    ``reason``) or a client tool's ``result`` or ``error``."""

    session_id: str
    tool_call_id: str
    approved: bool | None = None
    reason: str | None = None
    result: Any = None
    error: str | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> SubmitBody:
        if self.approved is None and self.reason is not None:
            raise ValueError("'reason' goes with 'approved'")
        if self.approved is not None and (self.result is not None or self.error is not None):
            raise ValueError("give 'approved' for an approval, or 'result'/'error' for a client tool, not both")
        return self

    def answer(self, approver: str | None) -> ToolAnswer:
        if self.approved is not None:
            return ApprovalResponse(
                tool_call_id=self.tool_call_id, approved=self.approved, reason=self.reason, approver=approver
            )
        return ClientToolResult(tool_call_id=self.tool_call_id, result=self.result, error=self.error)


class SessionQuery(_Strict):
    """``GET /status?session_id=...``."""

    session_id: str


class SseQuery(SessionQuery):
    """``GET /sse?session_id=...&deltas=true&follow=false&last_event_id=41``."""

    deltas: bool = False
    follow: bool = False
    """Keep the stream open after the session stops running (for its next turns)."""
    last_event_id: str | None = None
    """For clients that cannot set the ``Last-Event-ID`` header."""


class SessionsQuery(_Strict):
    """``GET /sessions?status=completed&limit=50``."""

    status: str | None = None
    limit: int = Field(default=50, ge=1, le=1000)
