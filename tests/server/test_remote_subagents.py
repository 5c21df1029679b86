"""Remote sub-agents: a parent on one ``helix-dbos serve`` process runs its child on another.

Two real server processes on 127.0.0.1, each on a database of its own
(``tests/apps/remote_app.py``): the child server serves ``remote-worker``; the parent
server serves ``remote-lead``, whose ``subagent__research`` is the worker on the child
server. Results, the proxied stream, interrupt and abort, and a SIGKILLed parent server
while a local companion and the remote child both work.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from helix_dbos._store.migrations import migrate
from serving import start_run, wait_until_served

APPS = Path(__file__).resolve().parents[1] / "apps"
CLI = "from helix_dbos._cli import main; main()"
TIMEOUT = 60.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    """A ``helix-dbos serve`` process of remote_app on a port of its own."""

    url: str
    database: str
    executor_id: str
    env: dict[str, str]
    proc: subprocess.Popen[str] | None = None

    def start(self) -> Server:
        port = self.url.rsplit(":", 1)[1]
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CLI, "serve", "--app", "remote_app:executor", "--allow-unauthenticated",
             "--port", port, "--executor-id", self.executor_id, "--queue", "remote"],
            cwd=APPS, env=self.env, text=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        wait_until_served(f"{self.url}/sessions", self.proc, timeout=TIMEOUT)
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait()

    def status(self, session_id: str) -> dict[str, Any]:
        return httpx.get(f"{self.url}/status", params={"session_id": session_id}).json()

    def start_run(self, agent: str, text: str, session_id: str) -> None:
        start_run(self.url, agent, text, session_id)

    def events(self, session_id: str) -> list[dict[str, Any]]:
        body = httpx.get(f"{self.url}/sse", params={"session_id": session_id}, timeout=TIMEOUT).text
        return [json.loads(line[5:]) for line in body.splitlines() if line.startswith("data:")]


def until(predicate: Callable[[], Any], what: str, timeout: float = TIMEOUT) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
    return value


@dataclass
class Pair:
    parent: Server
    child: Server
    ledger: Path

    def ran(self) -> list[str]:
        return self.ledger.read_text().splitlines() if self.ledger.exists() else []


@pytest.fixture
def pair(make_database: Callable[[], str], tmp_path: Path) -> Iterator[Pair]:
    ledger = tmp_path / "ledger.txt"
    child_db, parent_db = make_database(), make_database()
    migrate(child_db)
    migrate(parent_db)
    base = {**os.environ, "PYTHONPATH": str(APPS), "HELIX_REMOTE_LEDGER": str(ledger)}
    child_url, parent_url = f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"
    child = Server(child_url, child_db, "child-1", {**base, "HELIX_REMOTE_APP_URL": child_db, "HELIX_REMOTE_ROLE": "child"})
    parent = Server(parent_url, parent_db, "parent-1", {
        **base, "HELIX_REMOTE_APP_URL": parent_db, "HELIX_REMOTE_ROLE": "parent", "HELIX_REMOTE_CHILD_URL": child_url,
    })
    servers = Pair(parent, child.start(), ledger)
    parent.start()
    try:
        yield servers
    finally:
        parent.stop()
        child.stop()


def test_the_remote_child_runs_on_the_other_server_and_its_stream_is_proxied(pair: Pair) -> None:
    pair.parent.start_run("remote-lead", "topic 0.2", "lead-1")
    until(lambda: pair.parent.status("lead-1")["status"] == "completed", "the parent to complete")
    assert pair.parent.status("lead-1")["output"] == 'lead: "worked on topic 0.2"'
    child = "lead-1-remote-r1"
    remote = pair.child.status(child)
    assert (remote["status"], remote["run_count"], remote["output"]) == ("completed", 1, "worked on topic 0.2")
    assert pair.ran() == [child]

    events = pair.parent.events("lead-1")
    relayed = [e["data"] for e in events if e["type"] == "subagent_event"]
    assert {r["session_id"] for r in relayed} == {child}
    assert [r["event"]["seq"] for r in relayed] == [e["seq"] for e in pair.child.events(child)]  # each once, in order
    assert [r["event"]["type"] for r in relayed][0] == "run_start" and relayed[-1]["event"]["type"] == "finish"
    kinds = [e["type"] for e in events]
    assert kinds.index("subagent_start") < kinds.index("subagent_event") < kinds.index("subagent_finish")

    pair.parent.start_run("remote-lost", "topic 0", "lost-1")  # an agent the other server does not have
    until(lambda: pair.parent.status("lost-1")["status"] == "completed", "the parent to complete")
    output = pair.parent.status("lost-1")["output"]
    assert "Sub-agent research failed" in output and "refused (404)" in output, output


def test_interrupt_and_abort_of_the_parent_reach_the_remote_child(pair: Pair) -> None:
    pair.parent.start_run("remote-lead", "long 5", "lead-int")
    until(lambda: pair.ran(), "the remote child to work")
    assert httpx.post(f"{pair.parent.url}/interrupt", json={"session_id": "lead-int"}).status_code == 200
    until(lambda: pair.child.status("lead-int-remote-r1")["status"] == "interrupted", "the remote child interrupted")
    until(lambda: pair.parent.status("lead-int")["status"] == "interrupted", "the parent interrupted")

    pair.parent.start_run("remote-lead", "long 5", "lead-abort")
    until(lambda: len(pair.ran()) == 2, "the second remote child to work")
    assert httpx.post(f"{pair.parent.url}/abort", json={"session_id": "lead-abort"}).json()["aborted"] is True
    until(lambda: pair.child.status("lead-abort-remote-r1")["status"] == "aborted", "the remote child aborted")
    assert pair.parent.status("lead-abort")["status"] == "aborted"


def test_a_killed_parent_server_starts_nothing_twice_and_delivers_each_result_once(pair: Pair) -> None:
    """SIGKILL of the parent's server while its local companion and its remote child both
    work; restarted with the same executor id, it re-attaches to both."""
    pair.parent.start_run("remote-both", "crash 1.5", "both-crash")
    mate, child = "both-crash-agent-m", "both-crash-remote-r1"
    until(lambda: {mate, child} <= set(pair.ran()), "the companion and the remote child to work")
    pair.parent.kill()
    pair.parent.start()  # the same executor id: DBOS recovers the parent's run and its companion
    until(lambda: pair.parent.status("both-crash")["status"] == "completed", "the recovered parent to complete")
    output = pair.parent.status("both-crash")["output"]
    assert output == 'both: "worked on crash 1.5" | [companion m completed] worked on crash 1.5', output
    assert pair.child.status(child)["run_count"] == 1  # re-attached, not started again
    assert pair.parent.status(mate)["run_count"] == 1
    assert pair.ran().count(child) == 1 and 1 <= pair.ran().count(mate) <= 2  # the killed tool: at least once
    relayed = [e["data"]["event"]["seq"] for e in pair.parent.events("both-crash")
               if e["type"] == "subagent_event" and e["data"]["session_id"] == child]
    assert relayed == sorted(set(relayed)) and relayed[-1] == pair.child.events(child)[-1]["seq"]
