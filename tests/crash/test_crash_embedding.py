"""An agent started from the user's own DBOS workflow survives a SIGKILL of the whole app:
on restart the user's workflow ends SUCCESS with the agent's output, the session has
exactly one run, and the tool that was in flight is the only one that ran again."""

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
from helix_dbos._store.migrations import migrate

APP = Path(__file__).with_name("embedded_app.py")


def launch(url: str, mode: str, tmp_path: Path, session_id: str | None) -> subprocess.Popen[str]:
    args = [sys.executable, str(APP), url, mode, "onboard-1", str(tmp_path / "gate"), str(tmp_path / "ledger")]
    return subprocess.Popen(args + ([session_id] if session_id else []), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def wait_for_ledger(path: Path, proc: subprocess.Popen[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        if path.exists() and path.read_text():
            return
        time.sleep(0.02)
    raise AssertionError("the agent never reached its tool")


@pytest.mark.parametrize("session_id", [None, "ana-onboarding"], ids=["derived-session-id", "given-session-id"])
def test_user_workflow_with_an_agent_survives_sigkill(make_database: Any, tmp_path: Path, session_id: str | None) -> None:
    url = make_database()
    migrate(url)
    first = launch(url, "start", tmp_path, session_id)
    wait_for_ledger(tmp_path / "ledger", first)
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=30)

    (tmp_path / "gate").touch()
    second = launch(url, "recover", tmp_path, session_id)
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err[-3000:]
    result = json.loads(out.strip().splitlines()[-1])

    expected_session = session_id or "onboard-1-agent-1"
    assert result == {"session_id": expected_session, "status": "completed", "output": "ana is welcome"}
    with psycopg.connect(libpq_url(url)) as conn:
        sessions = conn.execute("SELECT id, status, run_count FROM helix.sessions").fetchall()
        runs = conn.execute("SELECT s.id, r.run, r.status FROM helix.runs r JOIN helix.sessions s ON s.num = r.session_num").fetchall()
        parent = conn.execute("SELECT status FROM dbos.workflow_status WHERE workflow_uuid = 'onboard-1'").fetchone()
    assert sessions == [(expected_session, "completed", 1)]
    assert runs == [(expected_session, 1, "completed")]
    assert parent == ("SUCCESS",)
    # the tool was in flight when the app died: its step had no checkpoint, so it ran again, once
    assert (tmp_path / "ledger").read_text().splitlines() == [expected_session, expected_session]
