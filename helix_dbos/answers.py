"""Answers to gated tool calls (human in the loop): the values, and what they mean to a run.

A gated call waits in its run's workflow on ``DBOS.recv`` (topic :func:`answer_topic` of
its step) until its deadline.
Anyone with the database URL answers it, from any process::

    executor.submit_tool_result("s1", ApprovalResponse(tool_call_id="t1", approved=True, approver="ana"))
    # or, with no agents and no DBOS launched:
    helix_dbos.admin.approve(url, "s1", "t1", approver="ana")

This module does no I/O: recording and delivering an answer is the executor's and the
operator API's work.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, model_validator


class ApprovalResponse(BaseModel):
    """A person's decision on an approval-gated tool call.

    Attributes:
        tool_call_id: The call it answers.
        approved: Whether the call may run.
        reason: Why; a denial's reason reaches the model.
        approver: Who decided, recorded with the answer.
    """

    tool_call_id: str
    approved: bool
    reason: str | None = None
    approver: str | None = None


class ClientToolResult(BaseModel):
    """The result (or error) of a client-executed tool call.

    Attributes:
        tool_call_id: The call it answers.
        result: The tool's output (checked against its ``output_schema``).
        error: The tool's error; give a result or an error, not both.
    """

    tool_call_id: str
    result: Any = None
    error: str | None = None

    @model_validator(mode="after")
    def _result_or_error(self) -> ClientToolResult:
        if self.error is not None and self.result is not None:
            raise ValueError("give either a result or an error, not both")
        return self


ToolAnswer = ApprovalResponse | ClientToolResult


class SubmitOutcome(BaseModel):
    """``accepted``: this submission is the call's answer; ``already_answered``: a no-op.

    Attributes:
        session_id: The session the call belongs to.
        tool_call_id: The call.
        status: ``accepted`` or ``already_answered``.
    """

    session_id: str
    tool_call_id: str
    status: Literal["accepted", "already_answered"]


def answer_topic(step: int) -> str:
    """The DBOS message topic the gated calls of a run's step ``step`` wait on (all on one
    topic: a message wakes the run, which then reads the recorded answers).

    Args:
        step: The step's number.

    Returns:
        The topic.
    """
    return f"helix.answers.step.{step}"


def denial_text(tool_call_id: str) -> str:
    """How the error result of a denied call begins (a reason may follow after ``: ``).

    Args:
        tool_call_id: The denied call's id.

    Returns:
        The text's beginning.
    """
    return f"Tool call {tool_call_id} was not approved by the user"


def outcome_error(kind: str, tool_call_id: str, message: dict[str, Any] | None) -> str | None:
    """The error text of an answered (or timed-out) call, or None when it may proceed.

    Args:
        kind: ``approval`` or ``client``.
        tool_call_id: The call's id.
        message: The recorded answer, or None for a call that timed out.

    Returns:
        The error text, or None.
    """
    if message is None:
        waited = "approval" if kind == "approval" else "the client's result"
        return f"Tool call {tool_call_id} timed out waiting for {waited}"
    if kind == "approval" and not message.get("approved"):
        reason = message.get("reason")
        return denial_text(tool_call_id) + (f": {reason}" if reason else "")
    if kind == "client" and message.get("error") is not None:
        return str(message["error"])
    return None
