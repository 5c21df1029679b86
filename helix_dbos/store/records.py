"""Rows of the ``helix`` schema as typed records, returned by the read API and the CLI."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from helix_dbos.types import Message


class RunRecord(BaseModel):
    """One run (``execute`` or ``resume``) of a session."""

    session_id: str
    run: int
    workflow_id: str
    kind: str
    status: str
    start_step: int
    end_step: int | None = None
    start_seq: int
    stop_reason: str | None = None
    error: str | None = None
    started_at: datetime
    ended_at: datetime | None = None


class PendingToolCall(BaseModel):
    """A tool call waiting for a person's approval or a client's result."""

    session_id: str
    tool_call_id: str
    root_session_id: str
    workflow_id: str
    run: int
    step: int
    tool_name: str
    kind: str
    input: Any = None
    output_schema: dict[str, Any] | None = None
    status: str
    requested_at: datetime
    deadline: datetime | None = None


class EventRecord(BaseModel):
    """One entry of a session's durable stream."""

    session_id: str
    seq: int
    run: int
    step: int
    type: str
    data: Any
    created_at: datetime


class UsageSummary(BaseModel):
    """Usage of a session, summed over its LLM calls and tools."""

    llm_calls: int = 0
    tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cost_usd: float | None = None
    llm_ms: float = 0.0
    tool_ms: float = 0.0
    client_tool_wait_ms: float = 0.0
    by_name: dict[str, dict[str, float]] = Field(default_factory=dict)


class SessionRecord(BaseModel):
    """A session as stored: status, counters, output, and (when loaded) transcript and state."""

    id: str
    agent_name: str
    status: str
    step_count: int
    run_count: int
    message_count: int
    event_seq: int
    output: Any = None
    error: str | None = None
    stop_reason: str | None = None
    interrupt_requested: bool = False
    parent_session_id: str | None = None
    parent_tool_call_id: str | None = None
    root_session_id: str
    created_at: datetime
    updated_at: datetime
    messages: list[Message] = Field(default_factory=list)
    state: dict[str, Any] = Field(default_factory=dict)
    pending: list[PendingToolCall] = Field(default_factory=list)
