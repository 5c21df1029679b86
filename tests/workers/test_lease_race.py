"""Two processes started at the same instant with one executor id: exactly one takes the
lease and runs, the other is refused in one ``error:`` line and exits 1.

The race is forced with Postgres: the test holds a SHARE lock on ``helix.workers``, which
lets reads and row locks through but no insert, until both workers wait on it; both are
then released at once, each past any check it made before writing its claim.
"""

from __future__ import annotations

import time

import psycopg
import pytest

from helix_dbos._database import libpq_url
from worker_kit import Proc, start_worker, until

WAITING_ON_WORKERS = (
    "SELECT count(*) FROM pg_locks WHERE relation = 'helix.workers'::regclass AND NOT granted"
    " AND pid = ANY (SELECT pid FROM pg_stat_activity WHERE datname = current_database())"
)


def first_to_exit(workers: list[Proc], timeout: float) -> Proc:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for worker in workers:
            if worker.popen.poll() is not None:
                return worker
        time.sleep(0.05)
    pytest.fail("neither worker exited:\n" + "\n".join(w.errors[-1] if w.errors else "" for w in workers))


def test_two_workers_started_at_once_with_one_id_one_runs_and_one_exits_1(url: str, procs: list[Proc]):
    with psycopg.connect(libpq_url(url)) as gate:
        gate.execute("LOCK TABLE helix.workers IN SHARE MODE")
        workers = [start_worker(url, executor_id="race") for _ in range(2)]
        procs.extend(workers)
        until(url, WAITING_ON_WORKERS, (), lambda n: n == 2, "both workers waiting to write their claim", timeout=90)
    # the gate's transaction ends here: both claims go on at the same instant

    loser = first_to_exit(workers, timeout=60)
    winner = workers[1 - workers.index(loser)]
    assert loser.exit_code(10) == 1, loser.errors
    errors = [line for line in loser.errors if "INFO" not in line]
    assert len(errors) == 1 and errors[0].startswith("error: executor id 'race' is held by a live process"), errors
    assert f"pid {winner.pid}" in errors[0], errors
    assert winner.listening() == "race"
    until(url, "SELECT count(*) FROM helix.workers WHERE executor_id = 'race' AND pid = %s AND state = 'live'"
               " AND last_seen > started_at", (winner.pid,), lambda n: n == 1, "the winner renewing its lease")
    assert winner.popen.poll() is None, winner.errors[-20:]
