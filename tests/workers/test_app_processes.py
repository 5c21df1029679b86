"""An app process (DBOS launched by the app, runs started in it without a queue) follows
the same rules as a worker: two replicas get their own executor ids, and the runs of one
that is killed, or that shuts DBOS down, are adopted by the other."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from helix_dbos._client.queues import EnqueuedRun, RunEnqueuer
from worker_kit import Proc, until

APP = str(Path(__file__).resolve().parent.parent / "scaleout" / "app_process.py")
RUNS = 4
TOOL_SECONDS = 4.0
LONG_LEASE = {"HELIX_LEASE_TTL": "120", "HELIX_LEASE_RENEW": "2"}
"""Leases that outlast the test: runs that complete were handed back, not left to expire."""


def start_app(url: str, runs: int, procs: list[Proc], env: dict[str, str] | None = None) -> tuple[Proc, str]:
    proc = Proc(url, work_seconds=TOOL_SECONDS, argv=[sys.executable, APP, str(runs)], env=env)
    procs.append(proc)
    return proc, proc.wait_for("started ").split()[1]


def results(url: str, pid: int, stopped_at: float) -> float:
    with RunEnqueuer(url) as enqueuer:
        for i in range(RUNS):
            sid = f"app-{pid}-{i}"
            result = enqueuer.result(EnqueuedRun(sid, 1, f"helix:{sid}:run:1"), timeout=45)
            assert result.status == "completed", result
    return time.monotonic() - stopped_at


@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM"])
def test_an_app_process_s_in_process_runs_are_adopted_by_its_replica(url: str, procs: list[Proc], how: str):
    env = LONG_LEASE if how == "SIGTERM" else None  # a kill is adopted when the default 10 s lease expires
    peer, peer_id = start_app(url, 0, procs, env)
    runner, runner_id = start_app(url, RUNS, procs, env)
    assert runner_id != peer_id and runner_id.endswith(f"-{runner.pid}")
    until(url, "SELECT count(*) FROM scaleout.intervals WHERE ended IS NULL AND pid = %s", (runner.pid,),
          lambda n: n == RUNS, "runs inside the runner's tool")
    stopped_at = time.monotonic()
    if how == "SIGKILL":
        runner.kill()
    else:
        assert runner.stop() == 0
    took = results(url, runner.pid, stopped_at)
    print(f"{how}: the app's {RUNS} in-process runs completed {took:.1f}s after it")
    if how == "SIGTERM":
        assert took < 60, "a released lease waited for its expiry (120 s)"
    until(url, "SELECT adopted_by FROM helix.workers WHERE executor_id = %s", (runner_id,),
          lambda by: by == peer_id, "the peer adopted the runner")
