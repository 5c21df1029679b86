"""Errors as JSON with the status that says what went wrong::

    {"error": "session_not_found", "message": "no session 's9'"}        # 404

Every :class:`~helix_dbos.errors.HelixError` the executor raises has its status here;
invalid bodies and query parameters are 422 with pydantic's list of what is wrong.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse

from helix_dbos.errors import (
    AgentNotRegisteredError,
    HelixError,
    InvalidLastEventIdError,
    InvalidToolResultError,
    SessionBusyError,
    SessionNotFoundError,
    ToolCallNotPendingError,
    ToolInputError,
    UnstorableTextError,
)

STATUSES: list[tuple[type[HelixError], int, str]] = [
    (SessionNotFoundError, 404, "session_not_found"),
    (AgentNotRegisteredError, 404, "agent_not_found"),
    (SessionBusyError, 409, "session_busy"),
    (ToolCallNotPendingError, 409, "tool_call_not_pending"),
    (InvalidToolResultError, 422, "invalid_tool_result"),
    (UnstorableTextError, 422, "unstorable_text"),
    (ToolInputError, 422, "invalid_input"),
    (InvalidLastEventIdError, 422, "invalid_last_event_id"),
]
"""The most specific class first; any other HelixError is 400 ``bad_request``."""


def problem(status: int, error: str, message: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": error, "message": message, **extra}, status_code=status)


def helix_problem(exc: HelixError) -> JSONResponse:
    for kind, status, error in STATUSES:
        if isinstance(exc, kind):
            return problem(status, error, str(exc))
    return problem(400, "bad_request", str(exc))


async def on_helix_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HelixError)
    return helix_problem(exc)


async def on_validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ValidationError)
    details = exc.errors(include_url=False, include_context=False, include_input=False)
    return problem(422, "invalid_request", "the request is not valid", details=details)
