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

from helix_dbos import HelixError, admin, define_agent, define_tool
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
        return (await admin.cancel_async(url, session_id)).model_dump(mode="json")

    @app.post("/sessions/{session_id}/resume")
    async def resume(session_id: str) -> dict[str, Any]:
        return (await admin.resume_async(url, session_id)).model_dump(mode="json")

    return app


@pytest.fixture(scope="module")
def api(database_url: str) -> Iterator[str]:
    serving = Serving(operator_app(database_url))
    yield serving.url
    serving.stop()


class Refund(BaseModel):
    amount: int


def test_routes_list_a_waiting_call_approve_it_and_the_run_completes(executor, api):
    refund = define_tool("refund", "Refund.", Refund, lambda args, ctx: {"refunded": args.amount}, require_approval=True)
    agent = define_agent(unique("ops"), tools=[refund])
    use_model(executor, calls(call("r1", "refund", {"amount": 3})), text("refunded"))
    handle = executor.execute(agent, "refund 3")
    sid = handle.session_id
    wait_for(lambda: httpx.get(f"{api}/sessions/{sid}/pending").json(), what="the pending call")

    [waiting] = httpx.get(f"{api}/sessions/{sid}/pending").json()
    listed = httpx.get(f"{api}/sessions", params={"status": "awaiting_approval"}).json()
    approved = httpx.post(f"{api}/sessions/{sid}/approve/r1").json()
    again = httpx.post(f"{api}/sessions/{sid}/deny/r1").json()

    assert (waiting["tool_call_id"], waiting["tool_name"], waiting["input"]) == ("r1", "refund", {"amount": 3})
    assert sid in [s["id"] for s in listed]
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
