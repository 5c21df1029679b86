"""A worker whose synchronous tool never returns: after an abort, ``helix-dbos resume``
runs the workflow again on the same worker (the resumed step waits for the body still
running there, within the tool's timeout, rather than start it twice), and the worker
still shuts down on SIGTERM.

Python cannot kill the hung thread; helix runs sync tools on daemon threads, which do not
keep the process alive (``tests/apps/hung_app.py`` is the worker's app).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psycopg

from helix_dbos import admin
from helix_dbos._client.queues import RunEnqueuer
from helix_dbos._database import libpq_url
from helix_dbos._store.migrations import migrate

APP_DIR = Path(__file__).resolve().parents[1] / "apps"
CLI = "from helix_dbos._cli import main; main()"
EXIT_BOUND = 60.0
"""Seconds the worker may take to exit after SIGTERM (generous: speed is not asserted)."""


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def session_status(url: str, session_id: str) -> str | None:
    with psycopg.connect(libpq_url(url)) as conn:
        row = conn.execute("SELECT status FROM helix.sessions WHERE id = %s", (session_id,)).fetchone()
    return row[0] if row else None


def test_a_worker_with_a_hung_tool_resumes_after_an_abort_and_exits_on_sigterm(make_database, tmp_path: Path):
    url = make_database()
    migrate(url)
    env = {**os.environ, "HELIX_HUNG_URL": url, "HELIX_HUNG_DIR": str(tmp_path), "HELIX_HUNG_TIMEOUT": "8"}
    worker = subprocess.Popen(
        [sys.executable, "-c", CLI, "worker", "--app", "hung_app:executor", "--executor-id", "hung-1",
         "--polling-interval", "0.05"],
        cwd=APP_DIR, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        with RunEnqueuer(url) as enqueuer:
            run = enqueuer.enqueue("hung-agent", "go", session_id="hung-session")
            wait_until(lambda: (tmp_path / "entered").exists(), "the worker to enter the hung tool")

            assert admin.abort(url, "hung-session", reason="it hangs").changed
            assert session_status(url, "hung-session") == "aborted"
            resumed = admin.resume(url, "hung-session")
            assert (resumed.run, resumed.status) == (1, "active")
            result = enqueuer.result(run, timeout=60)
        assert (result.status, result.output) == ("completed", "done")
        with psycopg.connect(libpq_url(url)) as conn:
            content = conn.execute(
                "SELECT message->>'content' FROM helix.messages WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %s) AND message->>'role' = 'tool'",
                ("hung-session",),
            ).fetchone()
        assert content == ("Tool 'hang' timed out after 8s",)

        worker.send_signal(signal.SIGTERM)
        try:
            code = worker.wait(EXIT_BOUND)
        except subprocess.TimeoutExpired:
            code = None
        assert code == 0, f"the worker did not exit after SIGTERM (exit code {code})"
    finally:
        if worker.poll() is None:
            worker.kill()
        output = worker.communicate()[0]
    assert "worker hung-1 stopped" in output, output
