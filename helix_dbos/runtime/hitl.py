"""Human in the loop: answering approval-gated and client-executed tool calls.

A gated call waits in its run's workflow on ``DBOS.recv`` (topic :func:`answer_topic`).
Anyone with the database URL answers it, from any process::

    executor.submit_tool_result("s1", ApprovalResponse(tool_call_id="t1", approved=True, approver="ana"))
    # or, with no agents and no DBOS launched:
    helix_dbos.admin.approve(url, "s1", "t1", approver="ana")

An answer is first recorded in ``helix.tool_call_answers`` (who, when, what, why: the
audit row; the first answer wins), then sent to the workflow with an idempotency key
derived from the call, so a repeated or concurrent submission is a no-op that reports
``already_answered`` and the workflow always receives the recorded answer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import jsonschema
import sqlalchemy as sa
from pydantic import BaseModel, model_validator

from helix_dbos.errors import HelixError, SessionNotFoundError, ToolCallNotPendingError
from helix_dbos.store import reads, writes

WAIT_FOREVER_SECONDS = 10 * 365 * 24 * 3600.0
"""The recv timeout of a call without ``approval_timeout`` / ``client_timeout``."""


class ApprovalResponse(BaseModel):
    """A person's decision on an approval-gated tool call."""

    tool_call_id: str
    approved: bool
    reason: str | None = None
    approver: str | None = None


class ClientToolResult(BaseModel):
    """The result (or error) of a client-executed tool call."""

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
    """``accepted``: this submission is the call's answer; ``already_answered``: a no-op."""

    session_id: str
    tool_call_id: str
    status: Literal["accepted", "already_answered"]


class InvalidToolResultError(HelixError):
    """A client result does not match the tool's output schema."""


Sender = Callable[[str, Any, str, str], None]
"""``send(workflow_id, message, topic, idempotency_key)``: DBOS.send or DBOSClient.send."""


def answer_topic(tool_call_id: str) -> str:
    """The DBOS message topic a gated call waits on."""
    return f"helix.answer.{tool_call_id}"


def submit_tool_result(engine: sa.Engine, send: Sender, session_id: str, answer: ToolAnswer) -> SubmitOutcome:
    """Validate ``answer``, record it (first answer wins) and deliver it to the waiting run.

    ``session_id`` is the session that made the call or its root session (a call of a
    sub-agent may be answered against the root, as seed 004 has it).
    """
    kind = "approval" if isinstance(answer, ApprovalResponse) else "client"
    with engine.connect() as conn:
        if reads.get_session_row(conn, session_id) is None:
            raise SessionNotFoundError(f"no session {session_id!r}")
        pending = reads.get_pending_call(conn, session_id, answer.tool_call_id) or reads.find_pending_under_root(
            conn, session_id, answer.tool_call_id
        )
    if pending is None:
        raise ToolCallNotPendingError(f"session {session_id!r} has no tool call {answer.tool_call_id!r} waiting for an answer")
    session_id = pending.session_id
    if pending.kind != kind:
        wanted = "an approval" if pending.kind == "approval" else "a client result"
        raise ToolCallNotPendingError(f"tool call {answer.tool_call_id!r} ({pending.tool_name}) waits for {wanted}, not this")
    if pending.status == "answered":
        return SubmitOutcome(session_id=session_id, tool_call_id=answer.tool_call_id, status="already_answered")
    if pending.status != "pending":  # timed_out, or cancelled with its run
        how = "timed out" if pending.status == "timed_out" else "was cancelled with its run"
        raise ToolCallNotPendingError(
            f"tool call {answer.tool_call_id!r} ({pending.tool_name}) is no longer waiting for an answer: it {how}"
        )
    if isinstance(answer, ClientToolResult):
        _validate_client_result(answer, pending.output_schema)
    message = {"kind": kind, **answer.model_dump(mode="json")}
    with engine.begin() as conn:
        accepted = writes.record_answer(conn, session_id, answer.tool_call_id, kind, message)
        recorded = message if accepted else writes.recorded_answer(conn, session_id, answer.tool_call_id)
    # Delivered after the audit row commits; re-sending the recorded answer completes a
    # delivery that a crashed submitter left undone, and is dropped by DBOS otherwise.
    send(pending.workflow_id, recorded, answer_topic(answer.tool_call_id), f"helix:{session_id}:{answer.tool_call_id}")
    status: Literal["accepted", "already_answered"] = "accepted" if accepted else "already_answered"
    return SubmitOutcome(session_id=session_id, tool_call_id=answer.tool_call_id, status=status)


def _validate_client_result(answer: ClientToolResult, schema: dict[str, Any] | None) -> None:
    if answer.error is not None or schema is None:
        return
    try:
        jsonschema.validate(answer.result, schema)
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "the result"
        raise InvalidToolResultError(
            f"client result for tool call {answer.tool_call_id!r} does not match the tool's output schema at {where}: {exc.message}"
        ) from None


def outcome_error(kind: str, tool_call_id: str, message: dict[str, Any] | None) -> str | None:
    """The error text of an answered (or timed-out) call, or None when it may proceed."""
    if message is None:
        waited = "approval" if kind == "approval" else "the client's result"
        return f"Tool call {tool_call_id} timed out waiting for {waited}"
    if kind == "approval" and not message.get("approved"):
        reason = message.get("reason")
        return f"Tool call {tool_call_id} was not approved by the user" + (f": {reason}" if reason else "")
    if kind == "client" and message.get("error") is not None:
        return str(message["error"])
    return None
