"""A chat survives its worker: the AI SDK's client (tests/chat/node) streams an answer
from one ``helix-dbos serve`` process, that process is SIGKILLed mid-answer, and the
client reloads against another one, which adopts the run (worker leases) and answers:
the message is whole, with no part lost or repeated."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from serving import wait_until_served

from helix_dbos._store.migrations import migrate

TESTS = Path(__file__).resolve().parent.parent
APPS = TESTS / "apps"
NODE_DIR = TESTS / "chat" / "node"
HELIX = Path(sys.executable).with_name("helix-dbos")
ANSWER = " ".join(f"word{n}" for n in range(60))
"""What the app's model streams (tests/apps/chat_app.py)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def served(url: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    port = free_port()
    # a lease short enough that the kill is noticed soon, long enough that a server slowed by
    # a loaded machine (both start at once) is not taken for dead and fenced
    env = {**os.environ, "HELIX_SERVER_APP_URL": url, "PYTHONPATH": str(APPS), "HELIX_LEASE_TTL": "6", "HELIX_LEASE_RENEW": "0.5"}
    proc = subprocess.Popen(
        [str(HELIX), "serve", "--app", "chat_app:executor", "--allow-unauthenticated", "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_served(f"{base}/sessions", proc, timeout=60)
        yield base, proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)


def test_a_reload_after_the_worker_was_sigkilled_mid_answer_resumes_the_whole_message(make_database: Callable[[], str]):
    url = make_database()
    migrate(url)
    chat_id = f"chat-{uuid.uuid4().hex[:8]}"
    with served(url) as (first, doomed), served(url) as (second, _):
        program = {
            "api": f"{first}/chat", "chatId": chat_id, "agent": "chat-weather",
            "steps": [{"send": "Weather in Oslo?", "dropAfter": 5}, {"signal": "kill"}, {"reload": True, "api": f"{second}/chat"}],
        }
        node = subprocess.Popen(
            ["node", str(NODE_DIR / "chat_client.mjs"), json.dumps(program)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        assert node.stdout is not None and node.stdin is not None
        assert node.stdout.readline().strip() == "SIGNAL kill"
        doomed.send_signal(signal.SIGKILL)  # mid-answer: the answer streams for seconds
        doomed.wait(timeout=10)
        node.stdin.write("go\n")
        node.stdin.flush()
        out, err = node.communicate(timeout=90)
        assert node.returncode == 0, err

    result = json.loads(out.strip().splitlines()[-1])
    assert len(result["requests"]) == 2, (result["error"], err)  # the dropped answer and the reload
    dropped, resumed = result["requests"]
    dropped_types = [c["type"] for c in dropped["chunks"] if isinstance(c, dict)]
    assert "finish" not in dropped_types and dropped_types.count("text-delta") >= 5  # cut mid-answer
    assert resumed["method"] == "GET" and resumed["chunks"][-2]["type"] == "finish"
    [message] = [m for m in result["messages"] if m["role"] == "assistant"]
    assert message["id"] == f"{chat_id}:run:1"
    assert [p["type"] for p in message["parts"]] == ["step-start", "tool-weather", "step-start", "text"]
    assert message["parts"][1]["state"] == "output-available"
    assert message["parts"][3] == {"type": "text", "text": ANSWER, "state": "done"}
