"""The operator API's async twins from a FastAPI app's routes, on a real uvicorn and a
real Postgres: the routes list sessions and pending calls, approve, cancel and resume
runs started by this process's DBOS, and a bad request gets a clear error."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from runtime_testkit import RESULT_TIMEOUT, Gate, Serving, call, calls, session_status, text, unique, use_model, wait_for

from helix_dbos import HelixError, ToolContext, admin, define_agent, define_tool
from helix_dbos.errors import SessionNotFoundError


def operator_app(url: str) -> FastAPI:
    """What an app's operator routes look like, each awaiting one async twin."""
    app = FastAPI()

    @app.exception_handler(SessionNotFoundError)
    async def not_found(request: Any, exc: SessionNotFoundError) -> JSONResponse:
        return JSONResponse({"error": str(exc)}, status_code=404)

    @app.exception_handler(HelixError)
    async def refused(request: Any, exc: HelixError) -> JSONResponse:
        return JSONResponse({"error": str(exc)}, status_code=409)

    @app.get("/sessions")
    async def sessions(status: str | None = None) -> list[dict[str, Any]]:
        return [s.model_dump(mode="json") for s in await admin.list_sessions_async(url, status=status)]

    @app.get("/sessions/{session_id}")
    async def session(session_id: str) -> dict[str, Any]:
        return (await admin.get_session_async(url, session_id)).model_dump(mode="json")

    @app.get("/sessions/{session_id}/detail")
    async def detail(session_id: str) -> dict[str, Any]:
        return (await admin.show_session_async(url, session_id)).model_dump(mode="json")

    @app.get("/sessions/{session_id}/pending")
    async def pending(session_id: str) -> list[dict[str, Any]]:
        return [p.model_dump(mode="json") for p in await admin.list_pending_async(url, session_id)]

    @app.post("/sessions/{session_id}/approve/{call_id}")
    async def approve(session_id: str, call_id: str) -> dict[str, Any]:
        return (await admin.approve_async(url, session_id, call_id, approver="ops")).model_dump(mode="json")

    @app.post("/sessions/{session_id}/deny/{call_id}")
    async def deny(session_id: str, call_id: str) -> dict[str, Any]:
        return (await admin.deny_async(url, session_id, call_id, reason="no")).model_dump(mode="json")

    @app.post("/sessions/{session_id}/cancel")
    async def cancel(session_id: str) -> dict[str, Any]:
        return (await admin.abort_async(url, session_id)).model_dump(mode="json")

    @app.post("/sessions/{session_id}/resume")
    async def resume(session_id: str) -> dict[str, Any]:
        return (await admin.resume_async(url, session_id)).model_dump(mode="json")

    return app


@pytest.fixture(scope="module")
def api(database_url: str) -> Iterator[str]:
    serving = Serving(operator_app(database_url))
    yield serving.url
    serving.stop()


def _pending_calls(api: str, session_id: str) -> list[dict[str, Any]]:
    response = httpx.get(f"{api}/sessions/{session_id}/pending")
    return response.json() if response.status_code == 200 else []


class Refund(BaseModel):
    amount: int


def test_routes_list_a_waiting_call_approve_it_and_the_run_completes(executor, api):
    refund = define_tool("refund", "Refund.", Refund, lambda args, ctx: {"refunded": args.amount}, require_approval=True)
    agent = define_agent(unique("ops"), tools=[refund])
    use_model(executor, calls(call("r1", "refund", {"amount": 3})), text("refunded"))
    handle = executor.execute(agent, "refund 3")
    sid = handle.session_id
    # Before the run has written its session, the route answers 404 (a JSON error, not a list).
    [waiting] = wait_for(lambda: _pending_calls(api, sid), timeout=30, what="the pending call")
    listed = httpx.get(f"{api}/sessions", params={"status": "awaiting_approval"}).json()
    approved = httpx.post(f"{api}/sessions/{sid}/approve/r1").json()
    again = httpx.post(f"{api}/sessions/{sid}/deny/r1").json()

    assert (waiting["tool_call_id"], waiting["tool_name"], waiting["input"]) == ("r1", "refund", {"amount": 3})
    assert sid in [s["session_id"] for s in listed]
    assert approved["status"] == "accepted" and again["status"] == "already_answered"
    assert handle.result(timeout=RESULT_TIMEOUT).output == "refunded"
    assert httpx.get(f"{api}/sessions/{sid}").json()["status"] == "completed"


def test_routes_cancel_a_run_and_resume_it_where_it_stopped(executor, api):
    gate = Gate()
    agent = define_agent(unique("ops"), tools=[gate.tool()])
    use_model(executor, calls(call("g1", "wait_here")), text("went on"))
    handle = executor.execute(agent, "go")
    gate.wait_entered()

    cancelled = httpx.post(f"{api}/sessions/{handle.session_id}/cancel", timeout=30).json()
    wait_for(lambda: session_status(executor, handle.session_id) == "aborted", what="the abort")
    gate.open()
    resumed = httpx.post(f"{api}/sessions/{handle.session_id}/resume", timeout=30).json()

    assert cancelled["changed"] is True and resumed["changed"] is True and resumed["run"] == 1
    wait_for(lambda: session_status(executor, handle.session_id) == "completed", timeout=RESULT_TIMEOUT, what="the resumed run")


def test_an_unknown_session_or_a_call_that_does_not_wait_is_a_clear_error(executor, api):
    missing = unique("nobody")
    agent = define_agent(unique("ops"))
    use_model(executor, text("done"))
    done = executor.execute(agent, "hi")
    done.result(timeout=RESULT_TIMEOUT)

    unknown = httpx.get(f"{api}/sessions/{missing}")
    no_pending = httpx.get(f"{api}/sessions/{missing}/pending")
    not_waiting = httpx.post(f"{api}/sessions/{done.session_id}/approve/nope")

    assert unknown.status_code == 404 and missing in unknown.json()["error"]
    assert no_pending.status_code == 404
    assert not_waiting.status_code == 409 and "nope" in not_waiting.json()["error"]


class Notes(BaseModel):
    notes: list[str] = []


class City(BaseModel):
    city: str


def test_a_session_s_detail_is_what_show_session_reads(executor, api, database_url):
    def note(args: City, ctx: ToolContext) -> dict[str, Any]:
        ctx.update_state(lambda draft: draft.notes.append(args.city))
        return {"noted": args.city}

    tools = [define_tool("note", "Note a city.", City, note),
             define_tool("refund", "Refund.", Refund, lambda args, ctx: {"refunded": args.amount}, require_approval=True)]
    agent = define_agent(unique("ops"), tools=tools, state_schema=Notes)
    use_model(executor, calls(call("n1", "note", {"city": "Lima"})), calls(call("n2", "note", {"city": "Oslo"})),
              calls(call("r1", "refund", {"amount": 3}), call("r2", "refund", {"amount": 4})), text("done"))
    handle = executor.execute(agent, "note and refund")
    sid = handle.session_id
    wait_for(lambda: len(httpx.get(f"{api}/sessions/{sid}/pending").json()) == 2, what="the pending calls")
    admin.deny(database_url, sid, "r2", reason="no")
    forked = admin.fork(database_url, sid, 1)

    waiting = httpx.get(f"{api}/sessions/{sid}/detail").json()
    fork = httpx.get(f"{api}/sessions/{forked.session_id}/detail").json()
    missing = httpx.get(f"{api}/sessions/{unique('nobody')}/detail")

    assert waiting == admin.show_session(database_url, sid).model_dump(mode="json")
    assert waiting["state"] == {"notes": ["Lima", "Oslo"]} and "r1" in [p["tool_call_id"] for p in waiting["pending"]]
    assert [a["tool_call_id"] for a in waiting["answers"]] == ["r2"] and waiting["usage"]["tool_calls"] == 2
    assert waiting["runs"][0]["workflow_status"] == "PENDING" and len(waiting["transcript"]) > 4
    assert fork == admin.show_session(database_url, forked.session_id).model_dump(mode="json")
    assert fork["forked_from"] == {"session_id": sid, "step": 1} and fork["state"] == {"notes": ["Lima"]}
    assert missing.status_code == 404 and "nobody" in missing.json()["error"]
    admin.approve(database_url, sid, "r1")
    assert handle.result(timeout=RESULT_TIMEOUT).output == "done"
