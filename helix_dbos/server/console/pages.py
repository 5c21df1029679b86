"""The console's pages and forms: the inbox of pending calls, the sessions list, a
session's page, and the two form posts (an answer; interrupt / abort / resume).

Every form posts with a CSRF token (``csrf.py``) and redirects back with a flash
message (post/redirect/get); a client result that does not validate is shown again on
its page with the error, status 422, and the call stays pending. The approver of an
answer is the server's authenticated principal (``request.state.principal``).

The pages read over the process's async pool (``executor.live()``), holding no thread;
so does an interrupt; answers, abort, resume and the workers page run their command in
Starlette's thread pool.

A session's page reads the session when it renders. An answered call stays pending, and
the session ``awaiting_*``, until the run has settled the step: the page shows where
such an answer is (``received.py``). The session page and the inbox stay current without
a reload: their live streams (``tail.py``, ``inbox.py``) say when what they show has
changed, and the page fetches itself again (through the same access checks) and swaps
the sections that differ.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from psycopg import AsyncConnection
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response, StreamingResponse
from starlette.templating import Jinja2Templates

from helix_dbos.answers import ApprovalResponse, ClientToolResult, ToolAnswer
from helix_dbos import admin
from helix_dbos._client import commands
from helix_dbos._client.commands import SessionDetail
from helix_dbos._client.executor import DBOSAgentExecutor
from helix_dbos.errors import HelixError, InvalidToolResultError
from helix_dbos.server.console.csrf import FIELD, CsrfGuard
from helix_dbos.server.console.inbox import inbox_frames, inbox_mark, waiting_calls
from helix_dbos.server.console.received import Received, call_notes, received_answers, status_note
from helix_dbos.server.console.tail import page_mark, tail_frames
from helix_dbos.server.access import NOBODY, access
from helix_dbos.server.json_body import parse_json
from helix_dbos.sse import resume_from
from helix_dbos._store import reads
from helix_dbos._store.tool_servers import tool_servers_async
from helix_dbos._store.records import SessionRecord
from helix_dbos.types import ACTIVE_STATUSES, SessionStatus

FLASH = "helix_flash"
STATUSES = [status.value for status in SessionStatus]
templates = Jinja2Templates(directory=str(Path(__file__).with_name("templates")))


def pretty(value: Any) -> str:
    """``value`` as indented JSON."""
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def as_text(value: Any) -> str:
    """A string as it is, anything else as indented JSON (a run's output, a message, a result)."""
    return value if isinstance(value, str) else pretty(value)


templates.env.filters["pretty"] = pretty
templates.env.filters["as_text"] = as_text


def _executor(request: Request) -> DBOSAgentExecutor:
    return request.app.state.executor  # type: ignore[no-any-return]


def _guard(request: Request) -> CsrfGuard:
    return request.app.state.csrf  # type: ignore[no-any-return]


def _approver(request: Request) -> str:
    principal = getattr(request.state, "principal", None)
    return "console" if principal is None else str(principal)


def _root(request: Request) -> str:
    return str(request.url_for("inbox").path)


def render(request: Request, template: str, status_code: int = 200, **context: Any) -> Response:
    """A page with the CSRF token, the flash message (cleared) and who is signed in."""
    guard = _guard(request)
    token, fresh = guard.token_for(request)
    flash = unquote(request.cookies.get(FLASH, "")) or None
    context = {"csrf_field": FIELD, "csrf_token": token, "flash": flash, "who": _approver(request), **context}
    response = templates.TemplateResponse(request, template, context, status_code=status_code)
    if fresh:
        guard.set_cookie(response, token, _root(request))
    if flash:
        response.delete_cookie(FLASH, path=_root(request))
    return response


def back(request: Request, target: str, message: str) -> Response:
    """303 to ``target`` (a URL of this console) with a flash message."""
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(FLASH, quote(message), path=_root(request), httponly=True, samesite="strict")
    return response


async def checked_form(request: Request) -> dict[str, str]:
    form = {key: str(value) for key, value in (await request.form()).items()}
    _guard(request).check(request, form)
    return form


async def on_csrf_rejected(request: Request, exc: Exception) -> Response:
    return PlainTextResponse(f"403 Forbidden: {exc}", status_code=403)


# --- pages --------------------------------------------------------------------------------


async def inbox(request: Request) -> Response:
    owner = await access(request).list_owner(request)
    if owner is NOBODY:
        return render(request, "inbox.html", calls=[], agents={}, servers={}, mark=inbox_mark([]))
    return render(request, "inbox.html", **await _executor(request).live().with_connection(lambda conn: _inbox(conn, owner or None)))


async def _inbox(conn: AsyncConnection[Any], owner: str | None) -> dict[str, Any]:
    """The calls waiting for a person (``inbox.py``), their sessions' agents and the MCP
    servers of their tools."""
    calls = await waiting_calls(conn, owner)
    sessions = {call.session_id for call in calls}
    agents = {sid: await _agent_of(conn, sid) for sid in sessions}
    servers = {sid: await tool_servers_async(conn, sid) for sid in sessions}
    return {"calls": calls, "agents": agents, "servers": servers, "mark": inbox_mark(calls)}


async def inbox_events(request: Request) -> Response:
    """The inbox's live stream as SSE (``inbox.py``): ``changed`` when its calls change;
    204 for a principal whose inbox is always empty."""
    owner = await access(request).list_owner(request)
    if owner is NOBODY:
        return Response(status_code=204)
    frames = inbox_frames(_executor(request).live(), owner or None, request.query_params.get("mark"))
    return StreamingResponse(frames, media_type="text/event-stream", headers={"Cache-Control": "no-cache"})


async def _agent_of(conn: AsyncConnection[Any], session_id: str) -> str:
    row = await reads.get_session_row_async(conn, session_id)
    return row.agent_name if row else "?"


async def sessions(request: Request) -> Response:
    status = request.query_params.get("status") or None
    if status is not None and status not in STATUSES:
        status = None

    owner = await access(request).list_owner(request)
    found = [] if owner is NOBODY else await _executor(request).live().sessions(limit=200, status=status, owner=owner or None)
    return render(request, "sessions.html", sessions=found, status=status, statuses=STATUSES)


async def workers(request: Request) -> Response:
    """Every process that runs agents, with its lease's status and its PENDING runs
    (for a principal ``authorize`` lets ``operate``)."""
    if not await access(request).allows(request, "operate", None):
        return render(request, "missing.html", status_code=404, message="no such page")
    found = await run_in_threadpool(admin.list_workers, _executor(request).database_url)
    return render(request, "workers.html", workers=found)


async def session(request: Request, error: str | None = None, entered: dict[str, str] | None = None) -> Response:
    session_id = request.path_params["session_id"]

    async def read(conn: AsyncConnection[Any]) -> tuple[SessionDetail, Received]:
        detail = await commands.session_detail_async(conn, session_id)
        return detail, await received_answers(conn, detail.pending, known={session_id: detail.answers})

    try:
        await access(request).session(request, _executor(request).live(), session_id, "read")
        detail, received = await _executor(request).live().with_connection(read)
    except HelixError as exc:
        return render(request, "missing.html", status_code=404, message=str(exc))
    return render(
        request, "session.html", status_code=422 if error else 200, detail=detail, tree=_tree(detail),
        active=detail.session.status in ACTIVE_STATUSES, error=error, entered=entered or {}, received=received,
        notes=call_notes(session_id, detail.pending, received, detail.runs), tool_names=_tool_names(detail),
        status_note=status_note(session_id, detail.pending, received, detail.runs),
        mark=page_mark(detail.session, detail.runs, detail.pending, len(detail.answers)),
    )


def _tool_names(detail: SessionDetail) -> dict[str, str]:
    """The tool of each call the session's model made, by call id: from the transcript,
    and from the pending calls (whose step may not be in the transcript yet)."""
    names = {call.tool_call_id: call.tool_name for call in detail.pending if call.session_id == detail.session.session_id}
    for entry in detail.transcript:
        names.update((call["id"], call["name"]) for call in entry.message.get("tool_calls") or [])
    return names


def _tree(detail: Any) -> list[tuple[int, SessionRecord]]:
    """The sub-agent sessions, depth first, with their depth under this session."""
    depth = {detail.session.session_id: 0}
    tree = []
    for child in detail.children:
        depth[child.session_id] = depth.get(child.parent_session_id or "", 0) + 1
        tree.append((depth[child.session_id], child))
    return tree


async def events(request: Request) -> Response:
    """The page's live stream as SSE: log lines and ``changed`` when its sections change
    (``tail.py``; resumes with Last-Event-ID)."""
    session_id = request.path_params["session_id"]
    from_seq = resume_from(request.headers.get("last-event-id"))
    live = _executor(request).live()
    await access(request).session(request, live, session_id, "read")
    frames = tail_frames(live, session_id, from_seq, request.query_params.get("mark"))
    return StreamingResponse(frames, media_type="text/event-stream", headers={"Cache-Control": "no-cache"})


# --- forms --------------------------------------------------------------------------------


async def answer(request: Request) -> Response:
    form = await checked_form(request)
    session_id, call_id = form.get("session_id", ""), form.get("tool_call_id", "")
    target = _target(request, form, session_id)
    try:
        reply = _answer_of(form, call_id, _approver(request))
    except ValueError as exc:
        return await _again(request, form, session_id, f"{call_id}: {exc}")
    try:
        await access(request).session(request, _executor(request).live(), session_id, "answer")
        outcome = await run_in_threadpool(_executor(request).submit_tool_result, session_id, reply)
    except InvalidToolResultError as exc:
        return await _again(request, form, session_id, str(exc))
    except HelixError as exc:
        return back(request, target, f"Not answered: {exc}")
    if outcome.status == "already_answered":
        return back(request, target, f"{call_id} was already answered; nothing changed.")
    return back(request, target, f"{_verb(form)} {call_id} of session {session_id}.")


def _answer_of(form: dict[str, str], call_id: str, approver: str) -> ToolAnswer:
    action = form.get("action")
    if action in ("approve", "deny"):
        reason = form.get("reason", "").strip() or None
        return ApprovalResponse(tool_call_id=call_id, approved=action == "approve", reason=reason, approver=approver)
    if action == "result":
        try:
            return ClientToolResult(tool_call_id=call_id, result=parse_json(form.get("result", "")))
        except json.JSONDecodeError as exc:
            raise ValueError(f"the result is not JSON ({exc})") from None
    if action == "error":
        return ClientToolResult(tool_call_id=call_id, error=form.get("error", "").strip() or "the client failed")
    raise ValueError(f"unknown action {action!r}")


def _verb(form: dict[str, str]) -> str:
    return {"approve": "Approved", "deny": "Denied", "result": "Gave a result to", "error": "Gave an error to"}.get(
        form.get("action", ""), "Answered"
    )


async def _again(request: Request, form: dict[str, str], session_id: str, error: str) -> Response:
    """The session's page again, with the error and what was typed (nothing lost)."""
    request.scope["path_params"] = {"session_id": session_id}
    return await session(request, error=error, entered={form.get("tool_call_id", ""): form.get("result", "")})


def _target(request: Request, form: dict[str, str], session_id: str) -> str:
    """Where a form returns: the inbox or the session's page (never a URL from the form)."""
    if form.get("next") == "session" and session_id:
        return str(request.url_for("session", session_id=session_id).path)
    return str(request.url_for("inbox").path)


async def control(request: Request) -> Response:
    form = await checked_form(request)
    session_id, action = form.get("session_id", ""), form.get("action")
    executor = _executor(request)
    target = _target(request, {"next": "session"}, session_id)

    def act() -> str:
        if action == "abort":
            done = executor.abort(session_id, f"aborted from the console by {_approver(request)}")
            return "Aborted." if done else "The session has no run in progress."
        if action == "resume":
            with executor.pool.connection() as conn:
                agent = commands.require_session(conn, session_id).agent_name
            return f"Resumed: run {executor.resume(agent, session_id).run} started."
        raise HelixError(f"unknown action {action!r}")

    try:
        await access(request).session(request, executor.live(), session_id, "write" if action == "resume" else "stop")
        if action == "interrupt":
            asked = await executor.interrupt_async(session_id)
            message = "Interrupt requested." if asked else "The session has no run in progress."
        else:
            message = await run_in_threadpool(act)
    except HelixError as exc:
        message = f"Not done: {exc}"
    return back(request, target, message)

