"""A tool that freezes its process costs a bounded number of workers, not the fleet.

Three real ``helix-dbos worker`` processes with 2 s leases; a run whose tool holds the GIL
in one C call for 12 s (libc's ``sleep`` through ``ctypes.PyDLL``, as a runaway regex
does), so the worker running it renews no lease and is adopted; the next worker that
takes the run freezes the same way. Once the run has lost ``max_worker_losses`` workers
with that call in flight, it ends ``failed`` with an error naming the step and the call,
instead of going to the last worker: the tool's body ran on that many workers, those
workers (and only they) are fenced when they wake (exit 3), the last one never is, and
the runs started alongside complete.
"""

from __future__ import annotations

import time

import psycopg
import pytest

from helix_dbos._client.queues import RunEnqueuer
from helix_dbos._database import libpq_url
from worker_kit import Proc, start_worker, until

SHORT_LEASE = {"HELIX_LEASE_TTL": "2", "HELIX_SCALEOUT_GIL_SECONDS": "12"}
OTHERS = 4
TIMES = {1: "once", 2: "2 times"}
FENCED_WITHIN = 60.0
"""Seconds a frozen worker may take to wake and exit (the GIL is held 12 s)."""


def bodies(url: str, session_id: str) -> list[int]:
    """The pids of the processes that started the session's tool, in order."""
    with psycopg.connect(libpq_url(url)) as conn:
        return [r[0] for r in conn.execute("SELECT pid FROM scaleout.intervals WHERE session_id = %s ORDER BY id",
                                           (session_id,))]


def exit_status(proc: Proc, timeout: float) -> int | None:
    """The worker's exit status once it exits within ``timeout`` seconds, else None."""
    deadline = time.monotonic() + timeout
    while proc.popen.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    return proc.popen.poll()


@pytest.mark.parametrize(("agent", "losses"), [("gil-agent", 2), ("gil-once-agent", 1)],
                         ids=["default-two-losses", "one-loss"])
def test_a_run_whose_tool_freezes_its_worker_fails_after_max_worker_losses(
    url: str, procs: list[Proc], agent: str, losses: int
) -> None:
    workers = [start_worker(url, concurrency=3, env=SHORT_LEASE) for _ in range(3)]
    procs.extend(workers)
    ids = {w.pid: w.listening() for w in workers}
    with RunEnqueuer(url) as enqueuer:
        poison = enqueuer.enqueue(agent, "poison", session_id="poison")
        until(url, "SELECT count(*) FROM scaleout.intervals WHERE session_id = 'poison'", (), lambda n: n == 1,
              "the first worker in the GIL-holding tool")
        others = [enqueuer.enqueue("scale-agent", f"other-{i}", session_id=f"other-{i}") for i in range(OTHERS)]
        result = enqueuer.result(poison, timeout=90)
        assert [enqueuer.result(run, timeout=60).status for run in others] == ["completed"] * OTHERS

    assert result.status == "failed", result
    assert result.error is not None
    assert result.error.startswith(f"ToolCallLostError: step 1's call 'gil' of tool 'hold_gil' was in flight each time"
                                   f" the run lost its worker, {TIMES[losses]} ("), result.error
    assert f"(max_worker_losses={losses})" in result.error

    ran = bodies(url, "poison")
    assert len(ran) == losses and len(set(ran)) == losses, ran  # the body ran once on each worker it cost
    assert all(ids[pid] in result.error for pid in ran), (ids, result.error)
    lost = [w for w in workers if w.pid in ran]
    kept = [w for w in workers if w.pid not in ran]
    assert [exit_status(w, FENCED_WITHIN) for w in lost] == [3] * losses, [w.lines for w in lost]
    for worker in lost:
        assert any(line.startswith(f"worker {ids[worker.pid]} lost its lease to") for line in worker.lines), worker.lines
    assert [w.popen.poll() for w in kept] == [None] * len(kept)  # the others were never fenced
    with psycopg.connect(libpq_url(url)) as conn:
        states = dict(conn.execute("SELECT executor_id, state FROM helix.workers").fetchall())
        status = conn.execute("SELECT status FROM helix.sessions WHERE id = 'poison'").fetchone()
    assert [states[ids[w.pid]] for w in kept] == ["live"] * len(kept), states
    assert status == ("failed",)


@pytest.mark.parametrize("stop", ["drain", "kill"])
def test_a_drain_hands_a_call_back_and_a_kill_loses_it(url: str, procs: list[Proc], stop: str) -> None:
    """``max_worker_losses=1``, a worker stopped while the run's 4 s tool runs, and then
    another started: a drain past its grace hands the call back (not a loss: the run
    completes on the other worker); SIGKILL loses it (the run fails without running the
    call again)."""
    first = start_worker(url, "--drain-timeout", "0.2", concurrency=1, work_seconds=4, env=SHORT_LEASE)
    procs.append(first)
    first_id = first.listening()
    with RunEnqueuer(url) as enqueuer:
        run = enqueuer.enqueue("scale-once-agent", "once", session_id="once")
        until(url, "SELECT count(*) FROM scaleout.intervals WHERE session_id = 'once'", (), lambda n: n == 1,
              "the first worker in the tool")
        if stop == "drain":
            assert first.stop() == 0, first.errors[-20:]
        else:
            first.kill()
        second = start_worker(url, concurrency=1, work_seconds=0.2, env=SHORT_LEASE)  # takes the run after the stop
        procs.append(second)
        second.listening()
        result = enqueuer.result(run, timeout=60)

    ran = bodies(url, "once")
    if stop == "drain":
        assert (result.status, len(ran)) == ("completed", 2), (result, ran)
    else:
        assert (result.status, ran) == ("failed", [first.pid]), (result, ran)
        assert result.error is not None and f"lost its worker, once ({first_id})" in result.error, result.error
