"""Sessions belong to someone: two signed-in principals against a real uvicorn.

Ana starts a session through the server; Bob, signed in too, tries every route of
``create_app`` on it (the executor routes, the chat routes, SSE, the console's pages and
forms). Each answer must be exactly the answer for a session that does not exist, and
nothing of Ana's session may change. Ana and an operator whom ``authorize`` lets do
anything succeed. Also: what code passes as ``owner``, what sub-agents and forks inherit,
and that a start is readable from any connection the moment it returns.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest
from pydantic import BaseModel
from runtime_testkit import RESULT_TIMEOUT, Serving, call, calls, rows, text, unique, use_model, wait_for
from starlette.requests import Request

from helix_dbos import admin, create_sub_agent_tool, define_agent, define_tool
from helix_dbos._client.queues import QueueSettings, RunEnqueuer, register_queue
from helix_dbos._database import libpq_url
from helix_dbos.errors import SessionNotFoundError
from helix_dbos.server import Action, create_app, owns
from helix_dbos._store.records import SessionRecord

TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')
GHOST = "no-such-session-anywhere"


class Refund(BaseModel):
    amount: int


def authenticate(request: Request) -> str | None:
    return request.headers.get("x-user") or None


def authorize(principal: Any, action: Action, session: SessionRecord | None) -> bool:
    """Operators may do anything; everyone else acts on their own sessions."""
    return principal == "ops" or owns(principal, action, session)


@pytest.fixture(scope="module")
def base(executor: Any) -> Iterator[str]:
    serving = Serving(create_app(executor, authenticate=authenticate, authorize=authorize, sse_keepalive=0.5))
    yield serving.url
    serving.stop()


def client(base: str, user: str) -> httpx.Client:
    return httpx.Client(base_url=base, headers={"X-User": user}, timeout=RESULT_TIMEOUT)


@pytest.fixture
def ana(base: str) -> Iterator[httpx.Client]:
    with client(base, "ana") as c:
        yield c


@pytest.fixture
def bob(base: str) -> Iterator[httpx.Client]:
    with client(base, "bob") as c:
        yield c


@pytest.fixture
def ops(base: str) -> Iterator[httpx.Client]:
    with client(base, "ops") as c:
        yield c


def refund_agent(executor: Any) -> Any:
    refund = define_tool("refund", "Refund.", Refund, lambda args, ctx: {"refunded": args.amount}, require_approval=True)
    agent = define_agent(unique("owned"), tools=[refund])
    executor.register(agent)
    return agent


def waiting_session(executor: Any, ana: httpx.Client) -> tuple[str, Any]:
    """A session Ana started over HTTP, waiting for her approval of refund r1."""
    agent = refund_agent(executor)
    use_model(executor, calls(call("r1", "refund", {"amount": 7})), text("refunded"))
    started = ana.post("/start", json={"agent": agent.name, "input": "refund please"})
    assert started.status_code == 202, started.text
    sid = started.json()["session_id"]
    wait_for(lambda: executor.list_pending(sid), what="the approval request")
    return sid, agent


def snapshot(executor: Any, sid: str) -> list[dict[str, Any]]:
    """Everything a route could change about the session."""
    return rows(
        executor,
        "SELECT s.status, s.run_count, s.message_count, s.event_seq, s.interrupt_requested, s.owner,"
        " (SELECT count(*) FROM helix.tool_call_answers a WHERE a.session_num = s.num) AS answers,"
        " (SELECT count(*) FROM helix.pending_tool_calls p WHERE p.session_num = s.num AND p.status = 'pending')"
        " AS pending FROM helix.sessions s WHERE s.id = %(s)s",
        s=sid,
    )


def token(page: httpx.Response) -> str:
    found = TOKEN.search(page.text)
    assert found, page.text
    return found.group(1)


CREATING = ("POST /start", "POST /chat (user)")
"""The routes that create a session under an id nobody has taken yet (so they cannot answer
as for a missing session: they refuse a taken id instead)."""


def attempts(c: httpx.Client, sid: str, agent: str, csrf: str, creating: bool = True) -> dict[str, httpx.Response]:
    """Every route of the server, aimed at session ``sid`` (``csrf``: the client's CSRF
    token); without ``creating``, none of the routes that would create the session."""
    user = {"id": sid, "messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": "mine now"}]}],
            "agent": agent}
    if "helix_flash" in c.cookies:
        c.cookies.delete("helix_flash")  # the last form's message, which the next page would show
    answer = {"id": sid, "messages": [{"id": "m2", "role": "assistant", "parts": [
        {"type": "tool-refund", "toolCallId": "r1", "state": "approval-responded",
         "approval": {"id": "r1", "approved": True}}]}]}
    found = {
        "GET /status": c.get("/status", params={"session_id": sid}),
        "GET /sessions/{id}": c.get(f"/sessions/{sid}"),
        "GET /sse": c.get("/sse", params={"session_id": sid}),
        "GET /chat/{id}/stream": c.get(f"/chat/{sid}/stream"),
        "POST /resume": c.post("/resume", json={"session_id": sid}),
        "POST /interrupt": c.post("/interrupt", json={"session_id": sid}),
        "POST /abort": c.post("/abort", json={"session_id": sid}),
        "POST /submit-tool-result": c.post("/submit-tool-result", json={"session_id": sid, "tool_call_id": "r1",
                                                                        "approved": True}),
        "POST /chat (answers)": c.post("/chat", json=answer),
        "POST /chat/{id}/stop": c.post(f"/chat/{sid}/stop"),
        "POST /chat/{id}/interrupt": c.post(f"/chat/{sid}/interrupt"),
        "POST /chat/{id}/abort": c.post(f"/chat/{sid}/abort", json={}),
        "POST /chat/{id}/submit-tool-result": c.post(f"/chat/{sid}/submit-tool-result",
                                                     json={"tool_call_id": "r1", "approved": True}),
        "GET /console/sessions/{id}": c.get(f"/console/sessions/{sid}"),
        "GET /console/events/{id}": c.get(f"/console/events/{sid}"),
    }
    if creating:
        found["POST /start"] = c.post("/start", json={"agent": agent, "input": "mine now", "session_id": sid})
        found["POST /chat (user)"] = c.post("/chat", json=user)
    for action in ("approve", "deny"):
        found[f"POST /console/answer ({action})"] = c.post("/console/answer", data={
            "csrf_token": csrf, "session_id": sid, "tool_call_id": "r1", "next": "inbox", "action": action})
    for action in ("interrupt", "abort", "resume"):
        found[f"POST /console/control ({action})"] = c.post("/console/control", data={
            "csrf_token": csrf, "session_id": sid, "action": action})
    return found


def seen(response: httpx.Response, sid: str) -> tuple[int, str, str]:
    """What a client sees, with the session id and the CSRF token taken out."""
    flash = httpx.Cookies(response.cookies).get("helix_flash") or ""
    body = TOKEN.sub("", response.text)
    return response.status_code, body.replace(sid, "<id>"), flash.replace(sid, "<id>")


def test_another_principal_gets_404_on_every_route_exactly_as_for_no_session_and_changes_nothing(executor, ana, bob):
    sid, agent = waiting_session(executor, ana)
    bobs_own, _ = waiting_session(executor, bob)  # Bob's own waiting call: his inbox has a form, so a CSRF token
    before = snapshot(executor, sid)
    assert before[0]["owner"] == "ana" and before[0]["status"] == "awaiting_approval"

    csrf = token(bob.get("/console/"))
    bobs = attempts(bob, sid, agent.name, csrf)
    ghosts = attempts(bob, GHOST, agent.name, csrf, creating=False)

    different = {route: (seen(bobs[route], sid), seen(ghosts[route], GHOST))
                 for route in ghosts if seen(bobs[route], sid) != seen(ghosts[route], GHOST)}
    assert different == {}
    for route in CREATING:  # a taken id is refused as a missing session would be anywhere else
        assert (bobs[route].status_code, bobs[route].json()) == (
            404, {"error": "session_not_found", "message": f"no session {sid!r}"}), route
    statuses = {route: response.status_code for route, response in bobs.items()}
    assert {route for route, status in statuses.items() if status not in (404, 204, 303)} == set(), statuses
    assert statuses["GET /chat/{id}/stream"] == 204 and statuses["GET /status"] == 404
    assert bobs["GET /status"].json() == {"error": "session_not_found", "message": f"no session {sid!r}"}
    assert snapshot(executor, sid) == before
    assert sid not in [s["id"] for s in bob.get("/sessions", params={"limit": 1000}).json()]
    assert sid not in bob.get("/console/sessions").text and sid not in bob.get("/console/").text
    assert bob.get("/console/workers").status_code == 404

    # the owner sees and answers it
    assert ana.get("/status", params={"session_id": sid}).json()["status"] == "awaiting_approval"
    assert sid in [s["id"] for s in ana.get("/sessions", params={"limit": 1000}).json()]
    assert sid in ana.get("/console/").text
    approved = ana.post("/submit-tool-result", json={"session_id": sid, "tool_call_id": "r1", "approved": True})
    assert approved.json()["status"] == "accepted", approved.text
    wait_for(lambda: ana.get("/status", params={"session_id": sid}).json()["status"] == "completed")
    bob.post("/submit-tool-result", json={"session_id": bobs_own, "tool_call_id": "r1", "approved": False})
    wait_for(lambda: executor.get_session(bobs_own).status == "completed")


def inbox_frames(stream: httpx.Response) -> Iterator[int]:
    """The ``waiting`` counts of the console inbox's live stream, frame by frame (an
    AssertionError when none comes for RESULT_TIMEOUT seconds: keep-alives go on)."""
    event, since = None, time.monotonic()
    for line in stream.iter_lines():
        assert time.monotonic() - since < RESULT_TIMEOUT, "the inbox's stream sent no change"
        if line.startswith("event: "):
            event = line.removeprefix("event: ")
        elif line.startswith("data: ") and event == "changed":
            yield json.loads(line.removeprefix("data: "))["waiting"]
            since = time.monotonic()


def test_the_console_inbox_s_live_stream_follows_only_the_principal_s_own_calls(executor, ana, bob):
    """``GET /console/inbox/events``: Bob's stream counts his calls and changes with them
    only; Ana's new call is neither counted nor announced to him."""
    with bob.stream("GET", "/console/inbox/events") as stream:
        assert stream.status_code == 200 and stream.headers["content-type"].startswith("text/event-stream")
        frames = inbox_frames(stream)
        waiting = next(frames)
        assert waiting == bob.get("/console/").text.count('class="card call')
        anas, _ = waiting_session(executor, ana)
        bobs, _ = waiting_session(executor, bob)
        assert next(frames) == waiting + 1  # his own call; Ana's changed nothing he sees
        bob.post("/submit-tool-result", json={"session_id": bobs, "tool_call_id": "r1", "approved": False})
        assert next(frames) == waiting
    ana.post("/submit-tool-result", json={"session_id": anas, "tool_call_id": "r1", "approved": False})
    for sid in (anas, bobs):
        wait_for(lambda: executor.get_session(sid).status == "completed")


def test_an_operator_that_authorize_lets_operate_sees_lists_and_answers_every_session(executor, ana, ops):
    sid, _ = waiting_session(executor, ana)
    ownerless = executor.execute(refund_agent(executor), "no owner").session_id  # code that gives no owner
    wait_for(lambda: executor.list_pending(ownerless), what="the ownerless session's approval request")

    listed = [s["id"] for s in ops.get("/sessions", params={"limit": 1000}).json()]
    inbox = ops.get("/console/").text

    assert sid in listed and ownerless in listed
    assert f"call-{sid}-r1" in inbox and f"call-{ownerless}-r1" in inbox
    assert ops.get("/console/workers").status_code == 200
    for path in (f"/sessions/{sid}", f"/console/sessions/{sid}", f"/sessions/{ownerless}"):
        assert ops.get(path).status_code == 200, path
    assert ops.get("/status", params={"session_id": sid}).json()["owner"] == "ana"
    assert ana.get("/status", params={"session_id": ownerless}).status_code == 404  # nobody's: fail-closed
    for session_id in (sid, ownerless):
        answered = ops.post("/submit-tool-result", json={"session_id": session_id, "tool_call_id": "r1", "approved": False})
        assert answered.json()["status"] == "accepted", answered.text
    assert rows(executor, "SELECT answered_by FROM helix.tool_call_answers WHERE session_num = helix.session_num(%(s)s)",
                s=sid) == [{"answered_by": "ops"}]
    wait_for(lambda: executor.get_session(sid).status == "completed")
    wait_for(lambda: executor.get_session(ownerless).status == "completed")
    assert executor.get_session(sid).owner == "ana"  # an operator's answer hands nothing over


def test_a_chat_naming_another_principals_id_writes_nothing_and_a_new_chat_belongs_to_its_sender(executor, ana, bob):
    agent = define_agent(unique("owned-chat"))
    executor.register(agent)
    use_model(executor, text("hello Ana"))
    sid = unique("chat-id-chosen-by-the-client")
    message = {"id": sid, "agent": agent.name,
               "messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]}

    first = ana.post("/chat", json=message)
    assert first.status_code == 200 and "hello Ana" in first.text
    before = snapshot(executor, sid)
    taken = bob.post("/chat", json=message)

    assert (taken.status_code, taken.json()["error"]) == (404, "session_not_found")
    assert snapshot(executor, sid) == before and before[0]["owner"] == "ana"


def test_sub_agent_sessions_and_forks_take_their_roots_owner(executor):
    child = define_agent(unique("owned-child"))
    parent = define_agent(unique("owned-parent"), tools=[create_sub_agent_tool(child)])
    executor.register(parent)
    use_model(executor, calls(call("k1", f"subagent__{child.name}", {"input": "go"})), text("child done"), text("parent done"))

    handle = executor.execute(parent, "start", owner="carol")
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    forked = admin.fork(executor.database_url, handle.session_id, from_step=1)

    owners = rows(executor, "SELECT s.owner FROM helix.sessions s JOIN helix.sessions r ON r.num = s.root_session_num"
                            " WHERE r.id = %(s)s", s=handle.session_id)
    assert len(owners) == 2 and {r["owner"] for r in owners} == {"carol"}
    assert executor.get_session(forked.session_id).owner == "carol"


def test_code_that_names_another_owners_session_is_refused_before_anything_starts(executor):
    agent = define_agent(unique("owned-code"))
    use_model(executor, text("one"))
    handle = executor.execute(agent, "hi", owner="dana")
    handle.result(timeout=RESULT_TIMEOUT)

    with pytest.raises(SessionNotFoundError, match="no session"):
        executor.execute(agent, "mine now", session_id=handle.session_id, owner="eve")
    assert executor.get_session(handle.session_id).run_count == 1


def test_a_start_is_committed_for_every_connection_when_it_returns_even_while_its_run_waits_in_a_queue(executor):
    """No worker takes the queue: only the start itself can have written the session and its run."""
    agent = define_agent(unique("read-your-writes"))
    executor.register(agent)
    idle = unique("idle-queue")
    url = libpq_url(executor.database_url)
    started = []
    try:
        started.append(executor.execute(agent, "sync", queue=idle, owner="fay"))
        with RunEnqueuer(executor.database_url, queue=idle) as enqueuer:
            started.append(enqueuer.enqueue(agent.name, "enqueued", owner="fay"))
        for run in started:
            with psycopg.connect(url) as conn:  # another connection, at once
                found = conn.execute(
                    "SELECT s.status, s.owner, r.run, (SELECT count(*) FROM helix.messages m WHERE m.session_num = s.num)"
                    " FROM helix.sessions s JOIN helix.runs r ON r.session_num = s.num WHERE s.id = %s",
                    (run.session_id,),
                ).fetchall()
            assert found == [("active", "fay", 1, 1)], run
            assert admin.show_session(executor.database_url, run.session_id).session.owner == "fay"
    finally:
        from dbos import DBOS

        for run in started:
            DBOS.cancel_workflow(run.workflow_id)


def test_execute_async_is_committed_when_it_returns(executor):
    from dbos import DBOS

    agent = define_agent(unique("read-your-writes-async"))
    executor.register(agent)

    async def main() -> tuple[str, list[tuple[Any, ...]]]:
        handle = await executor.execute_async(agent, "async", queue=unique("idle-queue"), owner="gil")
        with psycopg.connect(libpq_url(executor.database_url)) as conn:
            found = conn.execute("SELECT status, owner, run_count FROM helix.sessions WHERE id = %s",
                                 (handle.session_id,)).fetchall()
        await executor.close_async()
        return handle.workflow_id, found

    workflow_id, found = asyncio.run(main())
    DBOS.cancel_workflow(workflow_id)
    assert found == [("active", "gil", 1)]


def test_a_queued_run_of_an_agent_no_worker_knows_ends_failed_with_one_line(executor, caplog):
    queue = unique("known-queue")
    register_queue(QueueSettings(name=queue, polling_interval_sec=0.05))
    with RunEnqueuer(executor.database_url, queue=queue) as enqueuer:
        run = enqueuer.enqueue("nope-agent", "hello")
        result = enqueuer.result(run, timeout=RESULT_TIMEOUT)

    session = admin.show_session(executor.database_url, run.session_id).session
    assert (result.status, session.status) == ("failed", "failed")
    assert session.error == result.error and "\n" not in session.error
    assert "agent 'nope-agent' is not registered" in session.error and "Portable" not in session.error
    assert "Traceback" not in caplog.text
