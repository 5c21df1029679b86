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
such an answer is (``received.py``), and its live tail (``tail.py``) brings the status
up to date without a reload.
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
from helix_dbos.server.console.received import Received, call_notes, received_answers, status_note
from helix_dbos.server.console.tail import tail_frames
from helix_dbos.server.routes import require_known
from helix_dbos.sse import resume_from
from helix_dbos._store import async_reads
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
    return render(request, "inbox.html", **await _executor(request).live().with_connection(_inbox))


async def _inbox(conn: AsyncConnection[Any]) -> dict[str, Any]:
    """The calls waiting for a person: pending ones not answered yet."""
    pending = await async_reads.list_pending(conn)
    answered = await received_answers(conn, pending)
    calls = [call for call in pending if (call.session_id, call.tool_call_id) not in answered]
    agents = {sid: await _agent_of(conn, sid) for sid in {call.session_id for call in calls}}
    return {"calls": calls, "agents": agents}


async def _agent_of(conn: AsyncConnection[Any], session_id: str) -> str:
    row = await async_reads.get_session_row(conn, session_id)
    return row.agent_name if row else "?"


async def sessions(request: Request) -> Response:
    status = request.query_params.get("status") or None
    if status is not None and status not in STATUSES:
        status = None

    found = await _executor(request).live().sessions(limit=200, status=status)
    return render(request, "sessions.html", sessions=found, status=status, statuses=STATUSES)


async def workers(request: Request) -> Response:
    """Every process that runs agents, with its lease's status and its PENDING runs."""
    found = await run_in_threadpool(admin.list_workers, _executor(request).database_url)
    return render(request, "workers.html", workers=found)


async def session(request: Request, error: str | None = None, entered: dict[str, str] | None = None) -> Response:
    session_id = request.path_params["session_id"]

    async def read(conn: AsyncConnection[Any]) -> tuple[SessionDetail, Received]:
        detail = await commands.session_detail_async(conn, session_id)
        return detail, await received_answers(conn, detail.pending, known={session_id: detail.answers})

    try:
        detail, received = await _executor(request).live().with_connection(read)
    except HelixError as exc:
        return render(request, "missing.html", status_code=404, message=str(exc))
    return render(
        request, "session.html", status_code=422 if error else 200, detail=detail, tree=_tree(detail),
        active=detail.session.status in ACTIVE_STATUSES, error=error, entered=entered or {}, received=received,
        notes=call_notes(session_id, detail.pending, received, detail.runs), tool_names=_tool_names(detail),
        status_note=status_note(session_id, detail.pending, received, detail.runs),
    )


def _tool_names(detail: SessionDetail) -> dict[str, str]:
    """The tool of each call the session's model made, by call id."""
    return {
        call["id"]: call["name"] for entry in detail.transcript for call in entry.message.get("tool_calls") or []
    }


def _tree(detail: Any) -> list[tuple[int, SessionRecord]]:
    """The sub-agent sessions, depth first, with their depth under this session."""
    depth = {detail.session.id: 0}
    tree = []
    for child in detail.children:
        depth[child.id] = depth.get(child.parent_session_id or "", 0) + 1
        tree.append((depth[child.id], child))
    return tree


async def events(request: Request) -> Response:
    """The page's live tail as SSE: log lines and status changes (``tail.py``; resumes with Last-Event-ID)."""
    session_id = request.path_params["session_id"]
    from_seq = resume_from(request.headers.get("last-event-id"))
    live = _executor(request).live()
    await require_known(live, session_id)
    frames = tail_frames(live, session_id, from_seq)
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
            return ClientToolResult(tool_call_id=call_id, result=json.loads(form.get("result", "")))
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
            with executor.engine.connect() as conn:
                agent = commands.require_session(conn, session_id).agent_name
            return f"Resumed: run {executor.resume(agent, session_id).run} started."
        raise HelixError(f"unknown action {action!r}")

    try:
        if action == "interrupt":
            asked = await executor.interrupt_async(session_id)
            message = "Interrupt requested." if asked else "The session has no run in progress."
        else:
            message = await run_in_threadpool(act)
    except HelixError as exc:
        message = f"Not done: {exc}"
    return back(request, target, message)

