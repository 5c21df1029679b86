"""The agent server over a real uvicorn on 127.0.0.1, with httpx: every route's
success and error cases, fail-closed auth, and SSE resumed after a dropped connection
with no event lost or repeated. ``helix-dbos serve`` runs as a process of its own."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from pydantic import BaseModel
from runtime_testkit import (
    RESULT_TIMEOUT,
    FullThreadPool,
    Gate,
    Serving,
    call,
    calls,
    events,
    rows,
    text,
    unique,
    use_model,
    wait_for,
)
from starlette.requests import Request

from helix_dbos import admin, define_agent, define_tool
from helix_dbos._database import libpq_url
from helix_dbos.errors import ConfigurationError
from helix_dbos.server import Forbidden, create_app
from helix_dbos._store.delta_channels import listen_statement
from serving import wait_until_served

APPS = Path(__file__).resolve().parent.parent / "apps"
HELIX = Path(sys.executable).with_name("helix-dbos")


def authenticate(request: Request) -> str | None:
    user = request.headers.get("authorization", "").removeprefix("Bearer ")
    if user == "mallory":
        raise Forbidden("mallory may not call agents")
    return user or None


@pytest.fixture(scope="module")
def base(executor: Any) -> Iterator[str]:
    serving = Serving(create_app(executor, authenticate=authenticate, sse_keepalive=0.5))
    yield serving.url
    serving.stop()


@pytest.fixture
def ana(base: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base, headers={"Authorization": "Bearer ana"}, timeout=RESULT_TIMEOUT) as client:
        yield client


class Refund(BaseModel):
    amount: int


class City(BaseModel):
    city: str


def registered(executor: Any, agent: Any) -> Any:
    executor.register(agent)
    return agent


def sse_events(response: httpx.Response) -> Iterator[dict[str, Any]]:
    """The frames of an SSE response as dicts (``id``, ``event``, ``data``), comments skipped."""
    frame: dict[str, Any] = {}
    for line in response.iter_lines():
        if line == "":
            if frame:
                yield frame
            frame = {}
        elif not line.startswith(":"):
            key, _, value = line.partition(": ")
            frame[key] = json.loads(value) if key == "data" else value


def test_the_server_refuses_to_build_without_an_auth_decision(executor):
    with pytest.raises(ConfigurationError, match="authenticate"):
        create_app(executor)
    assert create_app(executor, allow_unauthenticated=True) is not None


@pytest.mark.parametrize("method,path", [
    ("POST", "/start"), ("POST", "/resume"), ("GET", "/sse?session_id=x"), ("GET", "/status?session_id=x"),
    ("POST", "/interrupt"), ("POST", "/abort"), ("POST", "/submit-tool-result"), ("GET", "/sessions"),
    ("GET", "/sessions/x"),
])
def test_every_route_needs_authentication_and_permission(base, method, path):
    anonymous = httpx.request(method, base + path, json={})
    forbidden = httpx.request(method, base + path, json={}, headers={"Authorization": "Bearer mallory"})

    assert (anonymous.status_code, anonymous.json()["error"]) == (401, "unauthenticated")
    assert (forbidden.status_code, forbidden.json()) == (403, {"error": "forbidden", "message": "mallory may not call agents"})


def test_start_status_sse_and_sessions(executor, ana):
    agent = registered(executor, define_agent(unique("http")))
    use_model(executor, text("hello over HTTP"))
    sid = unique("http-session")

    started = ana.post("/start", json={"agent": agent.name, "input": "hi", "session_id": sid})
    assert started.status_code == 202 and started.json()["session_id"] == sid and started.json()["run"] == 1
    with ana.stream("GET", "/sse", params={"session_id": sid}) as response:
        assert response.headers["content-type"].startswith("text/event-stream"), response.read()
        frames = list(sse_events(response))  # ends after the run's finish: the session is done

    assert [f["event"] for f in frames][-1] == "finish"
    assert [int(f["id"]) for f in frames] == list(range(1, len(frames) + 1))
    assert [f["data"]["type"] for f in frames] == [e["type"] for e in events(executor, sid)]
    status = ana.get("/status", params={"session_id": sid}).json()
    assert (status["status"], status["output"], status["current_run"]["run"]) == ("completed", "hello over HTTP", 1)
    listed = ana.get("/sessions", params={"status": "completed", "limit": 1000}).json()
    assert sid in [s["id"] for s in listed] and all(s["status"] == "completed" for s in listed)
    detail = ana.get(f"/sessions/{sid}").json()
    assert [e["message"]["role"] for e in detail["transcript"]] == ["user", "assistant"]
    assert detail["usage"]["total_tokens"] > 0 and detail["runs"][0]["status"] == "completed"


def test_bad_requests_get_clear_json_errors(executor, ana):
    agent = registered(executor, define_agent(unique("http-bad")))

    def error(response: httpx.Response) -> tuple[int, str]:
        return response.status_code, response.json()["error"]

    assert error(ana.post("/start", json={"agent": "nobody", "input": "x"})) == (404, "agent_not_found")
    assert error(ana.post("/start", json={"input": "x"})) == (422, "invalid_request")
    assert error(ana.post("/start", json={"agent": agent.name, "input": "x", "typo": 1})) == (422, "invalid_request")
    assert error(ana.post("/start", content=b"not json")) == (422, "invalid_request")
    assert error(ana.post("/start", json={"agent": agent.name, "input": "nul \u0000 here"})) == (422, "unstorable_text")
    assert error(ana.get("/status", params={"session_id": "no-such-session"})) == (404, "session_not_found")
    assert error(ana.get("/sessions/no-such-session")) == (404, "session_not_found")
    assert error(ana.get("/sse", params={"session_id": "no-such-session"})) == (404, "session_not_found")
    assert error(ana.post("/interrupt", json={"session_id": "no-such-session"})) == (404, "session_not_found")
    assert error(ana.post("/abort", json={"session_id": "no-such-session"})) == (404, "session_not_found")
    assert error(ana.get("/sessions", params={"limit": "many"})) == (422, "invalid_request")
    assert not rows(executor, "SELECT 1 FROM helix.sessions WHERE agent_name = %(a)s", a=agent.name)  # nothing written


def test_busy_interrupt_resume_and_abort(executor, ana):
    gate = Gate()
    agent = registered(executor, define_agent(unique("http-ctl"), tools=[gate.tool()]))
    use_model(executor, calls(call("w1", "wait_here")), text("after resume"))
    sid = unique("http-ctl-session")
    ana.post("/start", json={"agent": agent.name, "input": "go", "session_id": sid})
    gate.wait_entered()

    busy = ana.post("/start", json={"agent": agent.name, "input": "again", "session_id": sid})
    assert (busy.status_code, busy.json()["error"]) == (409, "session_busy")
    assert ana.post("/interrupt", json={"session_id": sid}).json() == {"session_id": sid, "interrupt_requested": True}
    gate.open()
    wait_for(lambda: ana.get("/status", params={"session_id": sid}).json()["status"] == "interrupted")
    not_running = ana.post("/interrupt", json={"session_id": sid})
    assert (not_running.status_code, not_running.json()["error"]) == (409, "not_running")
    assert ana.post("/abort", json={"session_id": sid}).status_code == 409

    resumed = ana.post("/resume", json={"session_id": sid})
    assert resumed.status_code == 202 and resumed.json()["run"] == 2
    wait_for(lambda: ana.get("/status", params={"session_id": sid}).json()["status"] == "completed")

    gate2 = Gate()
    agent2 = registered(executor, define_agent(unique("http-abort"), tools=[gate2.tool()]))
    use_model(executor, calls(call("w1", "wait_here")), text("never"))
    sid2 = unique("http-abort-session")
    ana.post("/start", json={"agent": agent2.name, "input": "go", "session_id": sid2})
    gate2.wait_entered()
    assert ana.post("/abort", json={"session_id": sid2, "reason": "operator said so"}).json()["aborted"] is True
    wait_for(lambda: ana.get("/status", params={"session_id": sid2}).json()["status"] == "aborted")
    gate2.open()


def test_submit_tool_result_approves_as_the_caller_and_refuses_repeats(executor, ana):
    refund = define_tool("refund", "Refund.", Refund, lambda args, ctx: {"refunded": args.amount}, require_approval=True)
    lookup = define_tool("lookup", "Ask the client.", City, "client", output_schema=City)
    agent = registered(executor, define_agent(unique("http-hitl"), tools=[refund, lookup]))
    use_model(executor, calls(call("r1", "refund", {"amount": 5}), call("c1", "lookup", {"city": "?"})), text("done"))
    sid = unique("http-hitl-session")
    ana.post("/start", json={"agent": agent.name, "input": "go", "session_id": sid})
    wait_for(lambda: len(ana.get("/status", params={"session_id": sid}).json()["pending"]) == 2)

    def submit(**body: Any) -> httpx.Response:
        return ana.post("/submit-tool-result", json={"session_id": sid, **body})

    assert submit(tool_call_id="c1", result={"town": 1}).json()["error"] == "invalid_tool_result"
    assert submit(tool_call_id="nope", approved=True).json()["error"] == "tool_call_not_pending"
    assert submit(tool_call_id="r1", approved=True, result=1).status_code == 422
    assert ana.post("/submit-tool-result", json={"session_id": "ghost", "tool_call_id": "r1", "approved": True}
                    ).status_code == 404
    assert submit(tool_call_id="r1", approved=True, reason="fine").json()["status"] == "accepted"
    again = submit(tool_call_id="r1", approved=False)
    assert (again.status_code, again.json()["error"]) == (409, "already_answered")
    assert submit(tool_call_id="c1", result={"city": "Paris"}).json()["status"] == "accepted"
    wait_for(lambda: ana.get("/status", params={"session_id": sid}).json()["status"] == "completed")
    answers = rows(executor, "SELECT tool_call_id, answered_by FROM helix.tool_call_answers WHERE session_num = helix.session_num(%(s)s)"
                   " ORDER BY tool_call_id", s=sid)
    assert answers == [{"tool_call_id": "c1", "answered_by": None}, {"tool_call_id": "r1", "answered_by": "ana"}]


def test_sse_resumes_after_a_dropped_connection_without_loss_or_repeats(executor, ana):
    gate = Gate()
    agent = registered(executor, define_agent(unique("http-sse"), tools=[gate.tool()]))
    mock = use_model(executor, calls(call("w1", "wait_here")), text("streamed after the gate"))
    mock.stream_chunk_chars = 6
    sid = unique("http-sse-session")
    ana.post("/start", json={"agent": agent.name, "input": "go", "session_id": sid})
    gate.wait_entered()

    with ana.stream("GET", "/sse", params={"session_id": sid}) as response:  # dropped mid-run
        first = []
        for frame in sse_events(response):
            first.append(frame)
            if frame["event"] == "tool_call":
                break
    headers = {"Last-Event-ID": first[-1]["id"]}

    def reconnect() -> list[dict[str, Any]]:
        with ana.stream("GET", "/sse", params={"session_id": sid, "deltas": "true"}, headers=headers) as response:
            return list(sse_events(response))

    with ThreadPoolExecutor(max_workers=1) as pool:
        reconnected = pool.submit(reconnect)
        # Deltas are never stored: the model may only speak once the new stream listens.
        wait_for(lambda: delta_listeners(executor, sid), what="the reconnected stream to listen for deltas")
        gate.open()
        rest = reconnected.result(timeout=RESULT_TIMEOUT)

    durable = [f for f in first + rest if f["event"] != "delta"]
    assert [int(f["id"]) for f in durable] == list(range(1, len(events(executor, sid)) + 1))
    assert all("id" not in f for f in rest if f["event"] == "delta")
    assert "".join(f["data"]["text"] for f in rest if f["event"] == "delta") == "streamed after the gate"
    by_query = ana.get("/sse", params={"session_id": sid, "last_event_id": str(len(durable) - 1)})
    assert [f["event"] for f in sse_events(by_query)] == ["finish"]
    bad = ana.get("/sse", params={"session_id": sid}, headers={"Last-Event-ID": "x1"})
    assert (bad.status_code, bad.json()["error"]) == (422, "invalid_last_event_id")


def delta_listeners(executor: Any, session_id: str) -> int:
    """Backends whose last statement LISTENs on the session's delta channel."""
    with psycopg.connect(libpq_url(executor.database_url)) as conn:
        statement = listen_statement(session_id).as_string(conn)
        return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE query = %s", (statement,)).fetchone()[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def served(executor: Any, *options: str, headers: dict[str, str] | None = None) -> Iterator[tuple[str, str, int]]:
    """``helix-dbos serve --app server_app:executor OPTIONS`` on a free port: (its URL, the
    line it printed first, its pid); stopped with SIGTERM, which must exit 0. ``headers``
    sign the first request in, for a server with ``--auth``."""
    port = free_port()
    env = {**os.environ, "HELIX_SERVER_APP_URL": executor.database_url, "PYTHONPATH": str(APPS)}
    proc = subprocess.Popen(
        [str(HELIX), "serve", "--app", "server_app:executor", "--allow-unauthenticated", "--queue", unique("served"),
         "--port", str(port), *options],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        base = f"http://127.0.0.1:{port}"
        # The line is printed once the port is bound: the app answers without a wait.
        assert httpx.get(f"{base}/sessions", timeout=30, headers=headers).status_code == 200
        yield base, first, proc.pid
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err


def test_helix_dbos_serve_applies_its_authorize_hook(executor):
    ana, bob, ops = ({"X-User": user} for user in ("ana", "bob", "ops"))
    with served(executor, "--auth", "server_app:authenticate", "--authorize", "server_app:authorize",
                headers=ana) as (base, _, _):
        started = httpx.post(f"{base}/start", headers=ana, json={"agent": "served-echo", "input": "hi"})
        sid = started.json()["session_id"]

        def status(who: dict[str, str]) -> int:
            return httpx.get(f"{base}/status", params={"session_id": sid}, headers=who).status_code

        assert (started.status_code, status(ana), status(bob), status(ops)) == (202, 200, 404, 200)


def test_serve_with_an_authorize_hook_it_cannot_load_is_one_clear_line(executor):
    done = subprocess.run([str(HELIX), "serve", "--app", "server_app:executor", "--auth", "server_app:authenticate",
                           "--authorize", "server_app:nope"],
                          capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(APPS),
                                                                            "HELIX_SERVER_APP_URL": executor.database_url})
    assert done.returncode == 1 and done.stderr.strip().splitlines()[-1].startswith("error: cannot load --authorize"), done.stderr


def test_helix_dbos_serve_interrupts_and_aborts_runs_another_process_started(executor):
    with served(executor, "--no-worker") as (base, first, _):
        assert first.startswith(f"serving agents on {base} (no worker")
        gates = [Gate(), Gate()]
        agent = define_agent(unique("served"), tools=[gates[0].tool(), gates[1].tool("wait_more")])
        use_model(executor, calls(call("w1", "wait_here")), text("never"))
        interrupted = executor.execute(agent, "go")  # this process runs it; the server process stops it
        gates[0].wait_entered()
        assert httpx.post(f"{base}/interrupt", json={"session_id": interrupted.session_id}).status_code == 200
        gates[0].open()
        assert interrupted.result(timeout=RESULT_TIMEOUT).status == "interrupted"

        use_model(executor, calls(call("w2", "wait_more")), text("never"))
        aborted = executor.execute(agent, "go")
        gates[1].wait_entered()
        assert httpx.post(f"{base}/abort", json={"session_id": aborted.session_id}).json()["aborted"] is True
        wait_for(lambda: httpx.get(f"{base}/status", params={"session_id": aborted.session_id}).json()["status"]
                 == "aborted")
        gates[1].open()


def test_helix_dbos_serve_runs_the_agents_itself_by_default(executor):
    with served(executor) as (base, first, pid):
        assert first.startswith(f"serving agents on {base} and working on queue")
        sid = httpx.post(f"{base}/start", json={"agent": "served-echo", "input": "who?"}).json()["session_id"]
        wait_for(lambda: httpx.get(f"{base}/status", params={"session_id": sid}).json()["status"] == "completed")
        assert httpx.get(f"{base}/status", params={"session_id": sid}).json()["output"] == f"served by {pid}"


def test_serve_without_an_auth_decision_is_one_clear_line():
    proc = subprocess.run([str(HELIX), "serve", "--app", "server_app:executor"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 1
    assert proc.stderr == "error: give --auth module:function, or --allow-unauthenticated to serve without authentication\n"


EXAMPLES = Path(__file__).resolve().parent.parent.parent / "examples"


def test_the_fastapi_example_serves_agents_and_starts_one_from_its_own_workflow(executor):
    port = free_port()
    env = {**os.environ, "HELIX_DATABASE_URL": executor.database_url, "HELIX_EXAMPLE_TOKEN": "s3cret"}
    env.pop("HELIX_EXAMPLE_MODEL", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "fastapi_app:app", "--app-dir", str(EXAMPLES), "--port", str(port),
         "--log-level", "warning"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    base = f"http://127.0.0.1:{port}"
    auth = {"Authorization": "Bearer s3cret"}
    try:
        wait_until_served(f"{base}/agents/sessions", proc, timeout=60, headers=auth)
        assert httpx.post(f"{base}/agents/start", json={"agent": "demo-researcher", "input": "x"}).status_code == 401
        started = httpx.post(f"{base}/agents/start", headers=auth,
                             json={"agent": "demo-researcher", "input": "Why do agent runs survive crashes?"})
        assert started.status_code == 202
        with httpx.stream("GET", f"{base}/agents/sse", params={"session_id": started.json()["session_id"]},
                          headers=auth, timeout=RESULT_TIMEOUT) as response:
            kinds = [frame["event"] for frame in sse_events(response)]
        assert kinds[0] == "run_start" and kinds[-1] == "finish" and kinds.count("tool_call") == 5  # 2 searches, 2 notes, remember

        brief = httpx.post(f"{base}/brief", params={"topic": "durable agents"}, timeout=RESULT_TIMEOUT)
        assert brief.status_code == 200 and brief.json()["sources"] == ["dbos", "postgres"]
        child = rows(executor, "SELECT status FROM helix.sessions WHERE id LIKE '%%-agent-%%' AND agent_name = "
                     "'demo-researcher' ORDER BY created_at DESC LIMIT 1")
        assert child == [{"status": "completed"}]  # the workflow's agent: a session of its own, derived id
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert "Traceback" not in err, err


def test_a_first_run_enqueued_and_not_begun_is_there_with_its_run_when_start_answers(executor, ana):
    from dbos import DBOS

    agent = registered(executor, define_agent(unique("http-enqueued")))
    sid = unique("http-enqueued")
    started = ana.post("/start", json={"agent": agent.name, "input": "x", "session_id": sid, "queue": unique("idle-queue")})
    try:
        status = ana.get("/status", params={"session_id": sid})
        assert started.status_code == 202, started.text
        body = status.json()
        assert (status.status_code, body["status"], body["owner"], body["current_run"]["run"]) == (200, "active", "ana", 1)
        assert body["current_run"]["workflow_status"] == "ENQUEUED"
    finally:
        DBOS.cancel_workflow(started.json()["workflow_id"])  # no worker takes that queue


def test_reads_and_interrupt_answer_while_every_thread_of_the_pool_is_held(executor):
    app = create_app(executor, allow_unauthenticated=True, sse_keepalive=0.5)
    pool = FullThreadPool(app)
    serving = Serving(app)
    gate = Gate()
    agent = registered(executor, define_agent(unique("http-async"), tools=[gate.tool()]))
    use_model(executor, calls(call("w1", "wait_here")), text("interrupted after the step"))
    sid = unique("http-async-session")
    executor.execute(agent, "go", session_id=sid)
    gate.wait_entered()

    try:
        with pool.held(serving.url), httpx.Client(base_url=serving.url, timeout=RESULT_TIMEOUT) as client:
            detail = client.get(f"/sessions/{sid}")
            expected = admin.show_session(executor.database_url, sid).model_dump(mode="json")
            expected["session"]["id"] = sid  # the old name beside session_id, for one release
            status = client.get("/status", params={"session_id": sid}).json()
            listed = client.get("/sessions", params={"status": "active", "limit": 1000}).json()
            missing = client.get(f"/sessions/{unique('nobody')}")
            interrupted = client.post("/interrupt", json={"session_id": sid}).json()
            gate.open()
            wait_for(lambda: client.get("/status", params={"session_id": sid}).json()["status"] == "interrupted")
    finally:
        gate.open()
        serving.stop()

    assert detail.status_code == 200 and detail.json() == expected
    assert expected["session"]["status"] == "active" and expected["runs"][0]["workflow_status"] == "PENDING"
    assert status["status"] == "active" and sid in [s["id"] for s in listed]
    assert (missing.status_code, missing.json()["error"]) == (404, "session_not_found")
    assert interrupted == {"session_id": sid, "interrupt_requested": True}
