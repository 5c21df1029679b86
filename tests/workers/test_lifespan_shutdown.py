"""An async app's shutdown on a real uvicorn: a FastAPI app whose lifespan ends with
``await helix_dbos.shutdown_async()`` (``tests/apps/lifespan_app.py``), or with the sync
``helix_dbos.shutdown()`` called on its event loop, stopped by SIGTERM or Ctrl-C (SIGINT)
while a run is inside a slow tool: uvicorn shuts down cleanly, the run is handed back, the
lease is released at once, and the app started again finishes the run. A run whose tool
ends within the grace period finishes in the app being stopped."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import psycopg
import pytest
from worker_kit import until

from helix_dbos._database import libpq_url
from serving import start_run, wait_until_served

APPS = Path(__file__).resolve().parent.parent / "apps"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_app(url: str, marks: Path, shutdown: str, **settings: str) -> tuple[subprocess.Popen[str], str]:
    """``uvicorn lifespan_app:app`` on a free port (``settings``: more of its environment):
    the process and its base URL."""
    port = free_port()
    env = {**os.environ, "HELIX_SERVER_APP_URL": url, "HELIX_LIFESPAN_MARKS": str(marks), "HELIX_SHUTDOWN": shutdown,
           **settings}
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "lifespan_app:app", "--app-dir", str(APPS), "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )
    base = f"http://127.0.0.1:{port}"
    wait_until_served(f"{base}/agents/sessions", proc, timeout=60)
    return proc, base


def stop(proc: subprocess.Popen[str], how: signal.Signals) -> str:
    """Send ``how``; what the process printed once it exited (the test fails unless it
    exits cleanly: status 0, or the signal uvicorn raises again after its shutdown)."""
    proc.send_signal(how)
    try:
        output, _ = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        output, _ = proc.communicate()
        pytest.fail(f"the app did not exit within 60 s of {how.name}:\n{output}")
    assert proc.returncode in (0, -how), (proc.returncode, output)
    return output


def one(url: str, query: str, *args: object) -> object:
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        row = conn.execute(query, args).fetchone()
    return None if row is None else row[0]


@pytest.mark.parametrize("how,shutdown", [
    (signal.SIGTERM, "async"),
    (signal.SIGINT, "async"),
    (signal.SIGTERM, "sync"),
])
def test_stopping_the_app_drains_hands_the_run_back_and_releases_the_lease(
    url: str, tmp_path: Path, how: signal.Signals, shutdown: str
) -> None:
    first, base = start_app(url, tmp_path, shutdown)
    try:
        start_run(f"{base}/agents", "slow-worker", "take your time", session_id="s-slow")
        until(url, "SELECT max(status) FROM helix.sessions WHERE id = 's-slow'", (), lambda s: s == "active", "the run")
        executor_id = until(url, "SELECT max(executor_id) FROM helix.workers WHERE pid = %s", (first.pid,), bool,
                            "the app's lease")
        until(url, "SELECT 1", (), lambda _: len(list(tmp_path.iterdir())) == 1, "the slow tool to start")
        output = stop(first, how)
    finally:
        if first.poll() is None:
            first.kill()
            first.communicate()

    assert "Application shutdown complete." in output, output
    assert "Traceback" not in output, output
    assert one(url, "SELECT state FROM helix.workers WHERE executor_id = %s", executor_id) == "released"
    assert one(url, "SELECT status FROM dbos.workflow_status WHERE workflow_uuid = 'helix:s-slow:run:1'") == "ENQUEUED"

    second, base = start_app(url, tmp_path, shutdown)
    try:
        until(url, "SELECT max(status) FROM helix.sessions WHERE id = 's-slow'", (), lambda s: s == "completed",
              "the restarted app to finish the run")
        detail = httpx.get(f"{base}/agents/status", params={"session_id": "s-slow"}, timeout=30).json()
        assert detail["output"] == f'finished: {{"done_by":{second.pid}}}'
        assert sorted(path.name for path in tmp_path.iterdir()) == [f"0-{first.pid}", f"1-{second.pid}"]
    finally:
        stop(second, signal.SIGTERM)


def test_a_run_that_ends_within_the_grace_period_finishes_on_the_stopping_app_s_event_loop(url: str, tmp_path: Path):
    app, base = start_app(url, tmp_path, "async", HELIX_SLOW_SECONDS="2", HELIX_DRAIN_TIMEOUT="30")
    try:
        start_run(f"{base}/agents", "slow-worker", "take your time", session_id="s-short")
        executor_id = until(url, "SELECT max(executor_id) FROM helix.workers WHERE pid = %s", (app.pid,), bool,
                            "the app's lease")
        until(url, "SELECT 1", (), lambda _: len(list(tmp_path.iterdir())) == 1, "the tool to start")
        output = stop(app, signal.SIGTERM)
    finally:
        if app.poll() is None:
            app.kill()
            app.communicate()

    assert "Application shutdown complete." in output and "Traceback" not in output, output
    assert one(url, "SELECT status FROM helix.sessions WHERE id = 's-short'") == "completed"
    assert one(url, "SELECT state FROM helix.workers WHERE executor_id = %s", executor_id) == "released"
    assert [path.name for path in tmp_path.iterdir()] == [f"0-{app.pid}"]
