"""The agent server's routes, over the executor and the operator
commands: every one works whichever process started the run, because everything it
reads or asks goes through the database (and DBOS), not through in-memory handles.

``/start``, ``/resume``, ``/status``, ``GET /sessions``, ``GET /sessions/{id}`` and
``/interrupt`` are native async (``execute_async``, ``resume_async``, ``interrupt_async``,
reads over the process's async pool; a start's claim of its run is one transaction in a
thread of asyncio's executor): they answer while Starlette's thread pool is full. Each
route acts on a session only when the server's ``authorize`` allows it
(``server/access.py``): what the caller may not see answers as what does not exist.
``/abort`` and ``/submit-tool-result`` run their command in that thread pool: an answer
and its message to the workflow commit in one transaction, which only DBOS's
synchronous client can do, and an abort is the one implementation the executor, the CLI
and the operator API share (each run ended, then its workflow cancelled; DBOS's
``cancel_workflow_async`` would take a thread anyway). ``/sse`` is native async too:
it shares the process's one listening connection and reads through a small pool
(:class:`~helix_dbos._client.live.LiveStreams`), holding no thread and no connection of
its own, one keep-alive comment per quiet interval, until the session stops running (or,
with ``follow``, until the client goes away).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, TypeVar

from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from helix_dbos._client import commands
from helix_dbos._client.executor import DBOSAgentExecutor
from helix_dbos._client.live import LiveStreams
from helix_dbos._client.streams import IDLE, follow_events_async
from helix_dbos._deltas import DeltaRecord
from helix_dbos._store.records import SessionRecord
from helix_dbos.events import RUN_END_EVENTS
from helix_dbos.server.bodies import (
    AbortBody,
    ResumeBody,
    SessionBody,
    SessionQuery,
    SessionsQuery,
    SseQuery,
    StartBody,
    SubmitBody,
)
from helix_dbos.server.access import NOBODY, access, owner_of, principal
from helix_dbos.server.json_body import read_json
from helix_dbos.server.problems import problem
from helix_dbos.sse import KEEPALIVE, encode, resume_from
from helix_dbos._text import require_storable
from helix_dbos.types import ACTIVE_STATUSES

B = TypeVar("B", bound=BaseModel)

_LISTING = {"messages", "state", "pending"}
"""Left out of a session row in lists (``GET /sessions/{id}`` has them)."""


def session_json(row: SessionRecord) -> dict[str, Any]:
    """A session row as the routes answer it: ``session_id``, and for one release its old
    name ``id`` beside it (deprecated)."""
    return {**row.model_dump(mode="json", exclude=_LISTING), "id": row.session_id}


def _executor(request: Request) -> DBOSAgentExecutor:
    return request.app.state.executor  # type: ignore[no-any-return]


def _approver(request: Request) -> str | None:
    return owner_of(principal(request))


async def _body(request: Request, model: type[B]) -> B:
    return model.model_validate(await read_json(request))


def _query(request: Request, model: type[B]) -> B:
    return model.model_validate(dict(request.query_params))


async def start(request: Request) -> Response:
    body = await _body(request, StartBody)
    executor = _executor(request)
    handle = await executor.execute_async(
        body.agent, body.input, body.session_id, body.queue, owner=await continued_owner(request, body.session_id)
    )
    return JSONResponse({"session_id": handle.session_id, "run": handle.run, "workflow_id": handle.workflow_id}, 202)


async def continued_owner(request: Request, session_id: str | None) -> str | None:
    """The ``owner`` for a start of ``session_id``: the principal's, for a new session;
    None for one the principal may continue (``write``: its owner stays); an existing
    session the principal may not continue is not found."""
    if session_id is not None:
        live = _executor(request).live()
        require_storable("session_id", session_id)
        session = await live.session_row(session_id)
        if session is not None:
            await access(request).session(request, live, session_id, "write")
            return None
    return owner_of(principal(request))


async def resume(request: Request) -> Response:
    body = await _body(request, ResumeBody)
    executor = _executor(request)
    session = await access(request).session(request, executor.live(), body.session_id, "write")
    handle = await executor.resume_async(body.agent or session.agent_name, body.session_id)
    return JSONResponse({"session_id": handle.session_id, "run": handle.run, "workflow_id": handle.workflow_id}, 202)


async def interrupt(request: Request) -> Response:
    body = await _body(request, SessionBody)
    executor = _executor(request)
    await access(request).session(request, executor.live(), body.session_id, "stop")
    if not await executor.interrupt_async(body.session_id):
        return problem(409, "not_running", f"session {body.session_id!r} has no run in progress")
    return JSONResponse({"session_id": body.session_id, "interrupt_requested": True})


async def abort(request: Request) -> Response:
    body = await _body(request, AbortBody)
    executor = _executor(request)
    await access(request).session(request, executor.live(), body.session_id, "stop")
    if not await run_in_threadpool(executor.abort, body.session_id, body.reason):
        return problem(409, "not_running", f"session {body.session_id!r} has no run in progress")
    return JSONResponse({"session_id": body.session_id, "aborted": True})


async def submit_tool_result(request: Request) -> Response:
    body = await _body(request, SubmitBody)
    executor = _executor(request)
    await access(request).session(request, executor.live(), body.session_id, "answer")
    answer = body.answer(_approver(request))
    outcome = await run_in_threadpool(executor.submit_tool_result, body.session_id, answer)
    if outcome.status == "already_answered":
        return problem(409, "already_answered", f"tool call {body.tool_call_id!r} was already answered",
                       outcome=outcome.model_dump(mode="json"))
    return JSONResponse(outcome.model_dump(mode="json"))


async def status(request: Request) -> Response:
    query = _query(request, SessionQuery)
    live = _executor(request).live()
    session = await access(request).session(request, live, query.session_id, "read")
    runs, pending = await live.runs_and_pending(query.session_id)
    return JSONResponse({
        **session_json(session),
        "current_run": runs[-1].model_dump(mode="json") if runs else None,
        "pending": [call.model_dump(mode="json") for call in pending],
    })


async def list_sessions(request: Request) -> Response:
    query = _query(request, SessionsQuery)
    require_storable("status", query.status)
    owner = await access(request).list_owner(request)
    if owner is NOBODY:
        return JSONResponse([])
    rows = await _executor(request).live().sessions(limit=query.limit, status=query.status, owner=owner or None)
    return JSONResponse([session_json(row) for row in rows])


async def get_session(request: Request) -> Response:
    session_id = request.path_params["session_id"]
    live = _executor(request).live()
    await access(request).session(request, live, session_id, "read")
    detail = await live.with_connection(lambda conn: commands.session_detail_async(conn, session_id))
    body = detail.model_dump(mode="json")
    body["session"]["id"] = detail.session.session_id
    for child, row in zip(body["children"], detail.children):
        child["id"] = row.session_id
    return JSONResponse(body)


async def sse(request: Request) -> Response:
    query = _query(request, SseQuery)
    from_seq = resume_from(request.headers.get("last-event-id") or query.last_event_id)
    live = _executor(request).live()
    await access(request).session(request, live, query.session_id, "read")  # 404 before the stream starts
    frames = sse_frames(live, query.session_id, from_seq, query.deltas, query.follow, request.app.state.sse_keepalive)
    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(frames, media_type="text/event-stream", headers=headers)


async def sse_frames(
    live: LiveStreams, session_id: str, from_seq: int, deltas: bool, follow: bool, keepalive: float
) -> AsyncIterator[str]:
    """The session's stream from ``from_seq`` as SSE frames; a keep-alive comment after
    each ``keepalive`` seconds without news. Without ``follow`` it ends once the session
    has no run in progress and its last event was sent."""
    last_sent = from_seq - 1
    async for item in follow_events_async(live, session_id, from_seq, deltas=deltas, until_run_end=False, heartbeat=keepalive):
        if item is IDLE:
            if not follow and await _finished(live, session_id, last_sent):
                return
            yield KEEPALIVE
            continue
        yield encode(item)  # type: ignore[arg-type]
        if isinstance(item, DeltaRecord):
            continue
        last_sent = item.seq  # type: ignore[union-attr]
        if not follow and item.type in RUN_END_EVENTS and await _finished(live, session_id, last_sent):  # type: ignore[union-attr]
            return


async def _finished(live: LiveStreams, session_id: str, last_sent: int) -> bool:
    session = await live.session_row(session_id)
    return session is not None and session.status not in ACTIVE_STATUSES and session.event_seq <= last_sent


ROUTES = [
    Route("/start", start, methods=["POST"]),
    Route("/resume", resume, methods=["POST"]),
    Route("/sse", sse, methods=["GET"]),
    Route("/status", status, methods=["GET"]),
    Route("/interrupt", interrupt, methods=["POST"]),
    Route("/abort", abort, methods=["POST"]),
    Route("/submit-tool-result", submit_tool_result, methods=["POST"]),
    Route("/sessions", list_sessions, methods=["GET"]),
    Route("/sessions/{session_id:path}", get_session, methods=["GET"]),
]
