"""Crash tests for human in the loop: the worker dies while a run waits for approval.

The worker is SIGKILLed while its run waits in DBOS.recv; the approval is submitted while
no worker runs (from this process, with only the database URL); a new worker with the
same executor id recovers the run, which completes with the approved tool executed
exactly once. With a deadline that passes while no worker runs, the approval is refused
and the recovered run times the call out: the tool never runs.
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

import pytest

from helix_dbos._database import libpq_url
from helix_dbos import admin
from helix_dbos.errors import ToolCallNotPendingError
from helix_dbos._store.migrations import migrate

WORKER = Path(__file__).with_name("hitl_worker.py")


def start(url: str, mode: str, ledger: Path, *options: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), url, "hitl-session", "exec-hitl", mode, str(ledger), *options],
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
    return admin.approve(url, "hitl-session", "t1", approver="ops", reason="checked").status


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
            "SELECT message->>'content' FROM helix.messages WHERE session_num = (SELECT num FROM helix.sessions WHERE id = 'hitl-session') AND message->>'role' = 'tool'")]
        audit = conn.execute(
            "SELECT answered_by, reason, approved FROM helix.tool_call_answers WHERE session_num = helix.session_num('hitl-session')"
        ).fetchall()
        pending = conn.execute(
            "SELECT status FROM helix.pending_tool_calls WHERE session_num = helix.session_num('hitl-session')").fetchall()
    assert contents == ['{"transferred":100}']
    assert audit == [("ops", "checked", True)]
    assert pending == [("answered",)]


def test_an_approval_after_the_deadline_while_no_worker_runs_is_refused_and_the_tool_never_runs(
    make_database: Any, tmp_path: Path
) -> None:
    url = make_database()
    migrate(url)
    ledger = tmp_path / "ledger.txt"
    first = start(url, "start", ledger, "2")
    wait_for_pending(url, first)
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=30)

    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        while conn.execute(
            "SELECT now() <= deadline FROM helix.pending_tool_calls WHERE session_num = helix.session_num('hitl-session')"
        ).fetchone() != (False,):
            time.sleep(0.05)  # the database's clock decides, not this process's
    with pytest.raises(ToolCallNotPendingError, match="'t1'.*timed out"):
        approve_without_a_worker(url)

    second = start(url, "recover", ledger, "2")
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err[-3000:]
    result = json.loads(out.strip().splitlines()[-1])
    assert result["status"] == "completed" and result["output"] == "transfer done"
    assert ledger.read_text() == "", "a call that timed out must never run"
    with psycopg.connect(libpq_url(url)) as conn:
        contents = [r[0] for r in conn.execute(
            "SELECT message->>'content' FROM helix.messages WHERE session_num = (SELECT num FROM helix.sessions WHERE id = 'hitl-session') AND message->>'role' = 'tool'")]
        audit = conn.execute("SELECT 1 FROM helix.tool_call_answers WHERE session_num = helix.session_num('hitl-session')").fetchall()
        pending = conn.execute(
            "SELECT status FROM helix.pending_tool_calls WHERE session_num = helix.session_num('hitl-session')").fetchall()
    assert contents == ["Tool call t1 timed out waiting for approval"]
    assert audit == []
    assert pending == [("timed_out",)]
