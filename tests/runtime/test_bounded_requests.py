"""Bounded requests on a real uvicorn: a body over the limit (announced by Content-Length
or sent in chunks) is a JSON 413 before more than the limit is read, on every route, the
console's forms and ``POST /chat`` (its own, larger limit) included; a body at the limit
works; JSON nested too deep is a 422; a refused body writes nothing. And ten 20 MB posts
to a ``helix-dbos serve`` process leave its memory where it was."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from runtime_testkit import RESULT_TIMEOUT, Serving, rows, text, unique, use_model, wait_for
from starlette.applications import Starlette
from starlette.routing import Mount

from helix_dbos import define_agent
from helix_dbos.server import create_app
from helix_dbos.server.json_body import MAX_JSON_DEPTH
from serving import wait_until_served

MiB = 1024 * 1024
APPS = Path(__file__).resolve().parent.parent / "apps"
HELIX = Path(sys.executable).with_name("helix-dbos")


@pytest.fixture(scope="module")
def base(executor: Any) -> Iterator[str]:
    """The agent server with its default limits, mounted under ``/agents`` as an app does."""
    outer = Starlette(routes=[Mount("/agents", app=create_app(executor, allow_unauthenticated=True))])
    serving = Serving(outer)
    yield serving.url + "/agents"
    serving.stop()


@pytest.fixture(scope="module")
def agent(executor: Any) -> str:
    config = define_agent(unique("bounded"))
    executor.register(config)
    return config.name


def start_body(agent: str, session_id: str, size: int) -> bytes:
    """A ``POST /start`` body of exactly ``size`` bytes (its input pads it)."""
    empty = json.dumps({"agent": agent, "session_id": session_id, "input": ""}).encode()
    return json.dumps({"agent": agent, "session_id": session_id, "input": "x" * (size - len(empty))}).encode()


def chat_body(agent: str, chat_id: str, size: int, question: str = "") -> bytes:
    """A ``POST /chat`` body of exactly ``size`` bytes: a new chat's user message, the
    ``question`` padded."""
    def body(text: str) -> bytes:
        message = {"id": "m1", "role": "user", "parts": [{"type": "text", "text": text}]}
        return json.dumps({"id": chat_id, "agent": agent, "trigger": "submit-message", "messages": [message]}).encode()
    return body(question + "x" * (size - len(body(question))))


def chunks(body: bytes, size: int = 64 * 1024) -> Iterator[bytes]:
    """``body`` as a generator: httpx sends it chunked, with no Content-Length."""
    for at in range(0, len(body), size):
        yield body[at:at + size]


def refused(response: httpx.Response, limit: int) -> None:
    assert response.status_code == 413, response.text
    assert response.json() == {
        "error": "body_too_large", "message": f"the request body is larger than {limit} bytes", "max_bytes": limit,
    }


def no_session(executor: Any, session_id: str) -> bool:
    return not rows(executor, "SELECT 1 FROM helix.sessions WHERE id = %(id)s", id=session_id)


def test_a_start_one_byte_over_the_limit_is_413_and_writes_nothing(executor, base, agent):
    sid = unique("too-large")
    body = start_body(agent, sid, MiB + 1)

    refused(httpx.post(f"{base}/start", content=body, headers={"content-type": "application/json"}), MiB)
    refused(httpx.post(f"{base}/start", content=chunks(body), headers={"content-type": "application/json"}), MiB)

    assert no_session(executor, sid)


def test_a_start_at_the_limit_runs(executor, base, agent):
    use_model(executor, text("read it all"))
    sid = unique("at-limit")

    started = httpx.post(f"{base}/start", content=chunks(start_body(agent, sid, MiB)), timeout=RESULT_TIMEOUT)

    assert started.status_code == 202, started.text
    wait_for(lambda: rows(executor, "SELECT status FROM helix.sessions WHERE id = %(id)s", id=sid)
             == [{"status": "completed"}], what="the run to complete")


def post_part_of_a_body(base: str, path: str, headers: dict[str, str], part: bytes) -> tuple[int, Any]:
    """Send the head of a ``POST`` and ``part`` of its body on a raw socket, then read the
    answer without sending the rest: (status, JSON body)."""
    url = httpx.URL(f"{base}{path}")
    head = f"POST {url.raw_path.decode()} HTTP/1.1\r\nHost: {url.host}\r\n"
    head += "".join(f"{name}: {value}\r\n" for name, value in headers.items()) + "\r\n"
    with socket.create_connection((url.host, url.port), timeout=RESULT_TIMEOUT) as conn:
        conn.sendall(head.encode() + part)
        data = b""
        while b"\r\n\r\n" not in data:
            data += conn.recv(65536)
        answer_head, _, body = data.partition(b"\r\n\r\n")
        length = int(re.search(rb"content-length: (\d+)", answer_head, re.IGNORECASE).group(1))  # type: ignore[union-attr]
        while len(body) < length:
            body += conn.recv(65536)
    return int(answer_head.split()[1]), json.loads(body)


def test_the_413_comes_before_the_rest_of_the_body_is_sent(base):
    """Content-Length over the limit: the answer comes with no byte of the body sent; in
    chunks: once the limit is passed, while the client could go on sending."""
    expected = {"error": "body_too_large", "message": f"the request body is larger than {MiB} bytes", "max_bytes": MiB}

    announced = post_part_of_a_body(base, "/start", {"Content-Length": str(20 * MiB)}, b"")
    chunk = b"%x\r\n%s\r\n" % (64 * 1024, b" " * (64 * 1024))
    chunked = post_part_of_a_body(base, "/start", {"Transfer-Encoding": "chunked"}, chunk * 17)

    assert announced == (413, expected)
    assert chunked == (413, expected)


READERS = ["/resume", "/interrupt", "/abort", "/submit-tool-result", "/chat/c1/abort", "/chat/c1/submit-tool-result",
           "/console/answer", "/console/control"]
"""Routes that read their body (the console's as a form)."""


def test_every_route_and_the_console_s_forms_are_bounded(base):
    body = b"x=" + b"x" * (MiB - 1)
    form = {"content-type": "application/x-www-form-urlencoded"}  # the console reads it as a form
    for path in [*READERS, "/start", "/sessions", "/chat/c1/stop", "/chat/c1/interrupt", "/console/"]:
        refused(httpx.post(f"{base}{path}", content=body, headers=form), MiB)
    for path in READERS:
        refused(httpx.post(f"{base}{path}", content=chunks(body), headers=form), MiB)


def test_a_chat_has_its_own_limit(executor, base, agent):
    use_model(executor, text("a long question, answered"))
    over, under = unique("chat-over"), unique("chat-under")

    refused(httpx.post(f"{base}/chat", content=chat_body(agent, over, 4 * MiB + 1)), 4 * MiB)
    refused(httpx.post(f"{base}/chat", content=chunks(chat_body(agent, over, 4 * MiB + 1))), 4 * MiB)
    with httpx.stream("POST", f"{base}/chat", content=chat_body(agent, under, 2 * MiB), timeout=RESULT_TIMEOUT) as answer:
        assert answer.status_code == 200
        assert '"type":"finish"' in answer.read().decode()

    assert no_session(executor, over)
    assert rows(executor, "SELECT status FROM helix.sessions WHERE id = %(id)s", id=under) == [{"status": "completed"}]


def nested(levels: int, inner: str = "1") -> str:
    return "[" * levels + inner + "]" * levels


@pytest.mark.parametrize("path", [
    "/start", "/resume", "/interrupt", "/abort", "/submit-tool-result", "/chat", "/chat/c1/abort",
    "/chat/c1/submit-tool-result",
])
def test_json_nested_too_deep_is_422_on_every_route_that_reads_json(base, path):
    for body in [nested(200_000), '{"session_id": ' + nested(MAX_JSON_DEPTH) + "}"]:
        answer = httpx.post(f"{base}{path}", content=body.encode(), timeout=RESULT_TIMEOUT)
        assert answer.status_code == 422, answer.text
        assert answer.json() == {
            "error": "too_deeply_nested", "message": f"the JSON is nested deeper than {MAX_JSON_DEPTH} levels",
            "max_depth": MAX_JSON_DEPTH,
        }


def test_json_nested_to_the_limit_is_read(executor, base, agent):
    use_model(executor, text("deep enough"))
    sid = unique("nested")
    body = f'{{"agent": "{agent}", "session_id": "{sid}", "input": {nested(MAX_JSON_DEPTH - 1)}}}'

    assert httpx.post(f"{base}/start", content=body.encode(), timeout=RESULT_TIMEOUT).status_code == 202
    refused_sid = unique("too-nested")
    body = f'{{"agent": "{agent}", "session_id": "{refused_sid}", "input": {nested(MAX_JSON_DEPTH)}}}'
    assert httpx.post(f"{base}/start", content=body.encode(), timeout=RESULT_TIMEOUT).status_code == 422

    wait_for(lambda: rows(executor, "SELECT status FROM helix.sessions WHERE id = %(id)s", id=sid)
             == [{"status": "completed"}], what="the run to complete")
    assert no_session(executor, refused_sid)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_bytes(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    kib = next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:"))
    return int(kib) * 1024


def test_ten_20_mb_chats_leave_the_server_s_memory_where_it_was(executor):
    """``helix-dbos serve`` (tests/apps/chat_app.py) in a process of its own: after one
    ordinary chat, ten 20 MB ``POST /chat`` (five announced, five chunked) move its RSS by
    less than 30 MB, and create no session."""
    port = free_port()
    env = {**os.environ, "HELIX_SERVER_APP_URL": executor.database_url, "PYTHONPATH": str(APPS)}
    proc = subprocess.Popen(
        [str(HELIX), "serve", "--app", "chat_app:executor", "--allow-unauthenticated", "--queue", unique("rss"),
         "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_served(f"{base}/sessions", proc, timeout=60)
        with httpx.stream("POST", f"{base}/chat", content=chat_body("chat-weather", unique("warm"), 200, "Just answer"),
                          timeout=60) as warm:
            assert '"type":"finish"' in warm.read().decode()
        before = rss_bytes(proc.pid)
        big = [unique("big") for _ in range(10)]
        statuses: list[int] = []
        for n, chat_id in enumerate(big):
            body = chat_body("chat-weather", chat_id, 20 * 1000 * 1000, "Just answer")
            with httpx.stream("POST", f"{base}/chat", content=body if n % 2 else chunks(body), timeout=120) as answer:
                answer.read()
                statuses.append(answer.status_code)
            del body
        grown = rss_bytes(proc.pid) - before
        assert grown < 30 * 1000 * 1000, f"RSS grew by {grown / 1e6:.1f} MB"
        assert statuses == [413] * 10
        assert all(no_session(executor, chat_id) for chat_id in big)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err


def test_a_chat_abort_whose_body_is_not_an_object_is_a_clear_422(base: str) -> None:
    response = httpx.post(f"{base}/chat/any-chat/abort", json=["stop", "now"])

    assert (response.status_code, response.json()["error"]) == (422, "invalid_request")
    assert "JSON object" in response.json()["message"]
