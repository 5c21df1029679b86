"""The next run of a session starts as soon as the previous one has ended for helix.

A queued run holds its session id as DBOS deduplication id until its workflow returns,
which is a moment after its last step commits (the session is then completed, its stream
ends): longer when a synchronous span exporter runs at the run span's end. A client that
starts the next turn at once must get it, not ``409 session_busy``. Here a real worker
exports through a deliberately slow exporter (``$HELIX_OBS_EXPORT_DELAY``), so the test
starts run 2 while run 1's workflow is certainly still running.
"""

from __future__ import annotations

from typing import Any

import httpx

from helix_dbos import admin
from helix_dbos._store.migrations import migrate
from obs_kit import free_port, server, until, worker

SESSION = "next-turn"


def _run_ended(url: str, run: int) -> Any:
    try:
        current = admin.get_current_run(url, SESSION)
    except Exception:
        return None  # the session is not created yet
    return current if current is not None and current.run == run and current.status == "completed" else None


def test_the_next_run_starts_while_the_previous_runs_workflow_is_still_returning(make_database: Any) -> None:
    url = make_database()
    migrate(url)
    port = free_port()
    work = worker(url, env={"HELIX_OBS_EXPORT_DELAY": "1.5"})
    serve = server(url, port)
    api = f"http://127.0.0.1:{port}"
    try:
        first = httpx.post(f"{api}/start", json={"agent": "obs-assistant", "input": "hi", "session_id": SESSION})
        assert first.status_code == 202, first.text
        ended = until(lambda: _run_ended(url, 1), "run 1 to end", every=0.02)
        assert ended.workflow_status == "PENDING"  # its workflow has not returned yet: the case under test

        second = httpx.post(f"{api}/start", json={"agent": "obs-assistant", "input": "again", "session_id": SESSION},
                            timeout=30)
        assert second.status_code == 202, second.text
        assert second.json()["run"] == 2
        until(lambda: [r.workflow_status for r in admin.list_runs(url, SESSION)] == ["SUCCESS"] * 2,
              "both runs' workflows to succeed")
    finally:
        serve.stop()
        work.stop()
