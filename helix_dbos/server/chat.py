"""Chat routes: the AI SDK's ``useChat`` (``DefaultChatTransport``) talks to durable agents.

The chat's id is the session's id, and each run of the session is one assistant message
(``helix_dbos._ui_stream``). Every stream is native async: it shares the process's one
listening connection and reads through a small pool, holding no thread. Reading the
run and its state and ``/interrupt`` hold none either; recording answers, ``stop``,
``abort`` and ``submit-tool-result`` run in a worker thread (an answer and its message to
the workflow commit in one transaction of DBOS's synchronous client; an abort is the
executor's one implementation).

- ``POST /chat``: a user message as last message starts the session's next run (a new
  session runs the body's ``agent``, else the server's ``chat_agent``) and streams its
  message; an assistant message as last message answers the calls its tool parts hold
  answers for (approvals, client tools' outputs) and continues that message from where
  it paused. Nothing else of the client's history is read.
- ``GET /chat/{id}/stream``: the current run's message from its ``start``, then live;
  204 when no run is in progress (``useChat({resume: true})``).
- ``POST /chat/{id}/stop`` (abort now), ``/interrupt`` (after the current step),
  ``/abort``, ``/submit-tool-result``: JSON, as the executor routes.

A message pauses (the stream ends with ``finish``) when the run waits for people; the
run holds no process meanwhile, and a reload, another server process or another day
continues it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from helix_dbos._client import commands
from helix_dbos._client.executor import DBOSAgentExecutor
from helix_dbos._client.live import LiveStreams
from helix_dbos._client.streams import CAUGHT_UP, IDLE, follow_events_async
from helix_dbos._client.notifications import Subscription
from helix_dbos._deltas import DeltaRecord
from helix_dbos.errors import AgentNotRegisteredError, ToolCallNotPendingError
from helix_dbos.server.bodies import AbortBody, SubmitBody
from helix_dbos.server.chat_request import ChatRequest, answered_calls, answers, user_text
from helix_dbos.server.access import access, owner_of, principal
from helix_dbos.server.json_body import read_json
from helix_dbos.server.problems import problem
from helix_dbos.sse import KEEPALIVE
from helix_dbos._store import reads
from helix_dbos._store.records import EventRecord, PendingToolCall, RunRecord, SessionRecord
from helix_dbos._text import require_storable
from helix_dbos.types import ACTIVE_STATUSES
from helix_dbos._ui_stream import DONE, HEADERS, UIMessageStream, encode


@dataclass(frozen=True)
class _Run:
    """Where a run's message begins: its first seq, the state then, and its open calls."""

    run: int
    start_seq: int
    state: Any
    waiting: dict[str, str]
    client_tools: frozenset[str] = frozenset()


def _executor(request: Request) -> DBOSAgentExecutor:
    return request.app.state.executor  # type: ignore[no-any-return]


async def chat(request: Request) -> Response:
    """``POST /chat``."""
    data = await read_json(request)
    body = ChatRequest.model_validate(data)
    require_storable("session_id", body.id)
    if body.trigger == "regenerate-message":
        return problem(422, "regenerate_not_supported", "a durable chat's transcript is kept: send a new message instead")
    last = body.messages[-1] if body.messages else {}
    if last.get("role") == "user":
        return await _next_turn(request, body, user_text(last))
    if last.get("role") == "assistant":
        return await _answer(request, body, last)
    return problem(422, "invalid_request", "the last message must be a user message or an assistant message with answers")


async def _next_turn(request: Request, body: ChatRequest, text: str) -> Response:
    if not text:
        return problem(422, "invalid_request", "the user message has no text")
    executor = _executor(request)
    live = executor.live()
    session = await live.session_row(body.id)
    if session is not None:
        await access(request).session(request, live, body.id, "write")
    agent = session.agent_name if session is not None else body.agent or request.app.state.chat_agent
    if agent is None:
        return problem(422, "invalid_request", "say which agent runs this chat ('agent'), or give the server a chat_agent")
    stack = contextlib.AsyncExitStack()
    try:
        subscription = await stack.enter_async_context(live.notifications.subscribe(body.id, deltas=True))
        state = await _latest_state(live, body.id) if session is not None else _initial_state(executor, agent)
        owner = None if session is not None else owner_of(principal(request))
        handle = await executor.execute_async(agent, text, body.id, owner=owner)
    except BaseException:
        await stack.aclose()
        raise
    ui = UIMessageStream(body.id, handle.run, state=state, client_tools=_client_tools(executor, agent))
    from_seq = session.event_seq + 1 if session is not None else 0
    return _stream(_frames(request, live, ui, from_seq, subscription, stack))


async def _answer(request: Request, body: ChatRequest, message: dict[str, Any]) -> Response:
    """Record the answers the message holds, then continue the message from its pause."""
    executor = _executor(request)
    live = executor.live()
    session = await access(request).session(request, live, body.id, "answer")
    run = await _run_of(executor, live, body.id, session.run_count)
    committed = await _events(live, body.id, run.start_seq)
    probe = _message(executor, body.id, run)
    for event in committed:
        probe.event(event)
    paused = [probe.paused_at[c] for c in answered_calls(message) if c in probe.paused_at]
    resume_after = max(paused) if paused else (committed[-1].seq if committed else run.start_seq - 1)
    stack = contextlib.AsyncExitStack()
    try:
        subscription = await stack.enter_async_context(live.notifications.subscribe(body.id, deltas=True))
        for answer in answers(message, run.waiting, _approver(request)):
            with contextlib.suppress(ToolCallNotPendingError):  # timed out, or its run moved on
                await asyncio.to_thread(executor.submit_tool_result, body.id, answer)
    except BaseException:
        await stack.aclose()
        raise
    ui = _message(executor, body.id, run)
    ui.answered(answered_calls(message))
    replay = [event for event in committed if event.seq <= resume_after]
    return _stream(_frames(request, live, ui, resume_after + 1, subscription, stack, replay))


async def resume_stream(request: Request) -> Response:
    """``GET /chat/{session_id}/stream``: the current run's message, or 204."""
    session_id = request.path_params["session_id"]
    executor = _executor(request)
    live = executor.live()
    session = await access(request).find(request, live, session_id, "read")
    if session is None or session.status not in ACTIVE_STATUSES:
        return Response(status_code=204)
    run = await _run_of(executor, live, session_id, session.run_count)
    stack = contextlib.AsyncExitStack()
    subscription = await stack.enter_async_context(live.notifications.subscribe(session_id, deltas=True))
    return _stream(_frames(request, live, _message(executor, session_id, run), run.start_seq, subscription, stack))


async def stop(request: Request) -> Response:
    """``POST /chat/{session_id}/stop``: the stop button; the run ends ``aborted`` now."""
    return await _abort(request, "stopped")


async def abort(request: Request) -> Response:
    data = await read_json(request)
    if data is not None and not isinstance(data, dict):
        return problem(422, "invalid_request", "the body must be a JSON object, such as {\"reason\": \"...\"}")
    reason = AbortBody.model_validate({**(data or {}), "session_id": request.path_params["session_id"]}).reason
    return await _abort(request, reason)


async def interrupt(request: Request) -> Response:
    session_id = request.path_params["session_id"]
    executor = _executor(request)
    await access(request).session(request, executor.live(), session_id, "stop")
    if not await executor.interrupt_async(session_id):
        return problem(409, "not_running", f"session {session_id!r} has no run in progress")
    return JSONResponse({"session_id": session_id, "interrupt_requested": True})


async def submit_tool_result(request: Request) -> Response:
    session_id = request.path_params["session_id"]
    data = await read_json(request)
    body = SubmitBody.model_validate({**(data if isinstance(data, dict) else {}), "session_id": session_id})
    executor = _executor(request)
    await access(request).session(request, executor.live(), session_id, "answer")
    outcome = await asyncio.to_thread(executor.submit_tool_result, session_id, body.answer(_approver(request)))
    if outcome.status == "already_answered":
        return problem(409, "already_answered", f"tool call {body.tool_call_id!r} was already answered",
                       outcome=outcome.model_dump(mode="json"))
    return JSONResponse(outcome.model_dump(mode="json"))


async def _abort(request: Request, reason: str) -> Response:
    session_id = request.path_params["session_id"]
    executor = _executor(request)
    await access(request).session(request, executor.live(), session_id, "stop")
    if not await asyncio.to_thread(executor.abort, session_id, reason):
        return problem(409, "not_running", f"session {session_id!r} has no run in progress")
    return JSONResponse({"session_id": session_id, "aborted": True})


# --- streaming ------------------------------------------------------------------------------


def _stream(frames: AsyncIterator[str]) -> StreamingResponse:
    return StreamingResponse(frames, media_type="text/event-stream", headers=HEADERS)


async def _frames(
    request: Request,
    live: LiveStreams,
    ui: UIMessageStream,
    from_seq: int,
    subscription: Subscription,
    stack: contextlib.AsyncExitStack,
    replay: Sequence[EventRecord] = (),
) -> AsyncIterator[str]:
    """The message's frames: what ``replay`` already showed the client is folded in
    silently, then ``start`` and the run's events from ``from_seq`` and its deltas, live,
    until the run ends or the message waits for people."""
    try:
        for event in replay:
            ui.event(event)
        for chunk in ui.start():
            yield encode(chunk)
        items = follow_events_async(
            live, ui.session_id, from_seq, deltas=True, until_run_end=False, heartbeat=request.app.state.sse_keepalive,
            marks=True, subscription=subscription,
        )
        async for item in items:
            if item is CAUGHT_UP:
                if ui.waiting:
                    for chunk in ui.pause():
                        yield encode(chunk)
                    break
                continue
            if item is IDLE:
                yield KEEPALIVE
                continue
            chunks = ui.delta(item) if isinstance(item, DeltaRecord) else ui.event(item)  # type: ignore[arg-type]
            for chunk in chunks:
                yield encode(chunk)
            if ui.ended:
                break
        yield DONE
    finally:
        await stack.aclose()


async def _events(live: LiveStreams, session_id: str, from_seq: int) -> list[EventRecord]:
    """Every committed event of the session from ``from_seq``."""
    found: list[EventRecord] = []
    while batch := await live.events_after(session_id, (found[-1].seq if found else from_seq - 1)):
        found.extend(batch)
    return found


def _message(executor: DBOSAgentExecutor, session_id: str, run: _Run) -> UIMessageStream:
    return UIMessageStream(session_id, run.run, state=run.state, client_tools=run.client_tools)


def _client_tools(executor: DBOSAgentExecutor, agent_name: str) -> frozenset[str]:
    """The client-executed tools of an agent (none when this process does not know it)."""
    try:
        return frozenset(tool.name for tool in executor.agent(agent_name).all_tools() if tool.is_client)
    except AgentNotRegisteredError:
        return frozenset()


async def _run_of(executor: DBOSAgentExecutor, live: LiveStreams, session_id: str, run: int) -> _Run:
    """Run ``run`` of the session: where its message begins, and what it waits on."""

    async def read(conn: AsyncConnection[Any]) -> tuple[SessionRecord, RunRecord, Any, list[PendingToolCall]]:
        session = commands.found_session(await reads.get_session_row_async(conn, session_id), session_id)
        record = (await reads.list_runs_async(conn, session_id))[run - 1]
        state = await reads.load_state_async(conn, session_id, record.start_step)
        return session, record, state, await reads.list_pending_async(conn, session_id, include_descendants=False)

    session, record, state, pending = await live.with_connection(read)
    waiting = {call.tool_call_id: call.kind for call in pending}
    return _Run(run, record.start_seq, state, waiting, _client_tools(executor, session.agent_name))


def _initial_state(executor: DBOSAgentExecutor, agent_name: str) -> Any:
    """A new session's state: its agent's state schema's defaults (None without one)."""
    try:
        schema = executor.agent(agent_name).state_schema
    except AgentNotRegisteredError:
        return None
    return None if schema is None else schema().model_dump(mode="json")


async def _latest_state(live: LiveStreams, session_id: str) -> Any:
    return await live.with_connection(lambda conn: reads.load_state_async(conn, session_id))


def _approver(request: Request) -> str | None:
    return owner_of(principal(request))


CHAT_ROUTES = [
    Route("/chat", chat, methods=["POST"]),
    Route("/chat/{session_id}/stream", resume_stream, methods=["GET"]),
    Route("/chat/{session_id}/stop", stop, methods=["POST"]),
    Route("/chat/{session_id}/interrupt", interrupt, methods=["POST"]),
    Route("/chat/{session_id}/abort", abort, methods=["POST"]),
    Route("/chat/{session_id}/submit-tool-result", submit_tool_result, methods=["POST"]),
]
