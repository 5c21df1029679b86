"""Crash test for human in the loop: the worker dies while a run waits for approval.

The worker is SIGKILLed while its run waits in DBOS.recv; the approval is submitted while
no worker runs (from this process, with only the database URL); a new worker with the
same executor id recovers the run, which completes with the approved tool executed
exactly once.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
from dbos import DBOSClient

from helix_dbos.database import libpq_url
from helix_dbos.runtime.hitl import ApprovalResponse, submit_tool_result
from helix_dbos.store.engine import create_engine
from helix_dbos.store.migrations import migrate

WORKER = Path(__file__).with_name("hitl_worker.py")


def start(url: str, mode: str, ledger: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), url, "hitl-session", "exec-hitl", mode, str(ledger)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def wait_for_pending(url: str, proc: subprocess.Popen[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        while time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            row = conn.execute(
                "SELECT status FROM helix.sessions WHERE id = 'hitl-session'"
            ).fetchone()
            if row == ("awaiting_approval",):
                return
            time.sleep(0.01)
    raise AssertionError("the run never started waiting for approval")


def approve_without_a_worker(url: str) -> str:
    client = DBOSClient(system_database_url=url)
    engine = create_engine(url)
    try:
        def send(workflow_id: str, message: Any, topic: str, key: str) -> None:
            client.send(workflow_id, message, topic, idempotency_key=key)

        answer = ApprovalResponse(tool_call_id="t1", approved=True, approver="ops", reason="checked")
        return submit_tool_result(engine, send, "hitl-session", answer).status
    finally:
        client.destroy()
        engine.dispose()


def test_worker_killed_while_waiting_for_approval_recovers_and_runs_the_tool_once(
    make_database: Any, tmp_path: Path
) -> None:
    url = make_database()
    migrate(url)
    ledger = tmp_path / "ledger.txt"
    first = start(url, "start", ledger)
    wait_for_pending(url, first)
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=30)
    assert ledger.read_text() == "", "the gated tool ran before it was approved"

    assert approve_without_a_worker(url) == "accepted"
    assert approve_without_a_worker(url) == "already_answered"

    second = start(url, "recover", ledger)
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err[-3000:]
    result = json.loads(out.strip().splitlines()[-1])
    assert result["status"] == "completed" and result["output"] == "transfer done"
    assert ledger.read_text().splitlines() == ["100"], "the approved tool must run exactly once"
    with psycopg.connect(libpq_url(url)) as conn:
        contents = [r[0] for r in conn.execute(
            "SELECT message->>'content' FROM helix.messages WHERE session_id = 'hitl-session' AND message->>'role' = 'tool'")]
        audit = conn.execute(
            "SELECT answered_by, reason, approved FROM helix.tool_call_answers WHERE session_id = 'hitl-session'"
        ).fetchall()
        pending = conn.execute(
            "SELECT status FROM helix.pending_tool_calls WHERE session_id = 'hitl-session'").fetchall()
    assert contents == ['{"transferred":100}']
    assert audit == [("ops", "checked", True)]
    assert pending == [("answered",)]
