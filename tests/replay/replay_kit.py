"""What the replay recorder (``scripts/record_replay_fixtures.py``) and the replay test
share: a real ``helix-dbos worker`` on :mod:`replay_agents`, the operator's answers, and
what a database holds once its sessions ended (transcripts and the ``replay`` ledger).

    worker = Worker(url, executor_id="replay-recorder")
    worker.listening()
    give_answers(url, answers)
    wait_until(lambda: all_ended(url, ["s-1"]), "every session ended")
    print(outcomes(url))
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import psycopg

from helix_dbos import admin
from helix_dbos._database import libpq_url
from helix_dbos.types import ACTIVE_STATUSES

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
DUMP_FILE = "dump.sql.gz"
EXPECTED_FILE = "expected.json"
LedgerRow = tuple[str, str, str, str]
"""A ``replay.calls`` row: (kind, key, phase, release)."""
RECORDED_EXECUTOR = "replay-recorder"
"""The executor id of the release's worker that the recorder kills."""


class Worker:
    """``helix-dbos worker --app replay_agents:make_executor`` on ``url``, its stdout and
    stderr lines collected as they come."""

    def __init__(self, url: str, executor_id: str | None = None) -> None:
        args = ["worker", "--app", "replay_agents:make_executor", "--concurrency", "8", "--polling-interval", "0.05"]
        if executor_id is not None:
            args += ["--executor-id", executor_id]
        env = {**os.environ, "HELIX_REPLAY_URL": url, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
        self.popen = subprocess.Popen([sys.executable, "-m", "helix_dbos", *args], env=env, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.lines: list[str] = []
        self.errors: list[str] = []
        for stream, into in ((self.popen.stdout, self.lines), (self.popen.stderr, self.errors)):
            threading.Thread(target=_collect, args=(stream, into), daemon=True).start()

    def listening(self, timeout: float = 60) -> str:
        """Wait until the worker listens; its executor id."""
        wait_until(lambda: any(line.startswith("worker ") for line in self.lines) or self.popen.poll() is not None,
                   "the worker to listen", timeout)
        started = [line for line in self.lines if line.startswith("worker ")]
        if not started:
            raise RuntimeError(f"the worker exited with {self.popen.returncode}:\n" + "\n".join(self.errors[-30:]))
        return started[0].split()[1]

    def kill(self) -> None:
        """SIGKILL: the process ends where it is, its lease left to expire."""
        self.popen.kill()
        self.popen.wait()

    def stop(self, timeout: float = 60) -> int:
        """SIGTERM (a drain); its exit code."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.popen.wait()


def _collect(stream: Any, into: list[str]) -> None:
    for line in stream:
        into.append(line.rstrip("\n"))


def wait_until(ready: Callable[[], Any], what: str, timeout: float = 90) -> Any:
    """Poll ``ready`` until it returns something true; raise ``TimeoutError`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not (value := ready()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout}s for {what}")
        time.sleep(0.1)
    return value


def give_answers(url: str, answers: list[dict[str, Any]]) -> None:
    """Answer pending calls as an operator does: ``approve``, ``deny`` or ``submit``."""
    for answer in answers:
        session, call = answer["session"], answer["tool_call_id"]
        if answer["kind"] == "approve":
            outcome = admin.approve(url, session, call, approver="replay")
        elif answer["kind"] == "deny":
            outcome = admin.deny(url, session, call, reason=answer["reason"], approver="replay")
        else:
            outcome = admin.submit(url, session, call, result=answer["result"])
        if outcome.status != "accepted":
            raise RuntimeError(f"answer {answer} was not taken: {outcome}")


def all_ended(url: str, named: Iterable[str]) -> bool:
    """Whether the sessions ``named`` exist and every session on ``url`` has ended its run,
    in helix and in DBOS (a run's workflow ends a moment after its session's last commit)."""
    sessions = admin.list_sessions(url, limit=1000)
    if not set(named) <= {session.session_id for session in sessions}:
        return False
    for session in sessions:
        run = admin.get_current_run(url, session.session_id)
        if session.status in ACTIVE_STATUSES or (run is not None and run.workflow_status in ("PENDING", "ENQUEUED")):
            return False
    return True


def outcomes(url: str) -> dict[str, dict[str, Any]]:
    """Each session's status, output and transcript (each message with its run and step),
    by session id: what must come out the same however the runs went."""
    found: dict[str, dict[str, Any]] = {}
    for session in sorted(admin.list_sessions(url, limit=1000), key=lambda s: s.session_id):
        detail = admin.show_session(url, session.session_id)
        found[session.session_id] = {
            "status": str(detail.session.status),
            "output": detail.session.output,
            "transcript": [{"run": e.run, "step": e.step, "message": e.message} for e in detail.transcript],
        }
    return found


def ledger(url: str) -> list[LedgerRow]:
    """The ``replay.calls`` rows in order."""
    with psycopg.connect(libpq_url(url)) as conn:
        return conn.execute("SELECT kind, key, phase, release FROM replay.calls ORDER BY id").fetchall()


def cut_calls(rows: list[LedgerRow]) -> list[str]:
    """The tool calls of ledger ``rows`` that started and never ended (their process died
    inside them), sorted."""
    started = {key for kind, key, phase, _ in rows if kind == "tool" and phase == "start"}
    return sorted(started - {key for kind, key, phase, _ in rows if kind == "tool" and phase == "end"})


def open_gate(url: str) -> None:
    """Let ``long_job`` finish."""
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute("UPDATE replay.gates SET open = true WHERE name = 'long_job'")
