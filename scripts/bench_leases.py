"""What worker leases cost and how fast they act: adoption after SIGKILL, drain after SIGTERM.

    python scripts/bench_leases.py [--database-url URL] [--rounds N] [--quick]

Workers are real ``helix-dbos worker`` processes on scripts/bench_workers.py's app (bench.py's
agent, model latency 50 ms, 5 turns a run), with the default lease (10 s, renewed every 2 s).
Each round, on a database of its own (created on the server of --database-url, else the
embedded Postgres, and dropped after):

- adoption: workers A and B, 8 runs in flight on A; A is SIGKILLed. Adoption latency is
  the time from the kill to B's handing A's runs back (the lease row's ``adopted_at``); the
  time to the last run's end is printed beside it.
- drain: worker A with 8 runs in flight gets SIGTERM; drain time is the time to its exit
  (its runs finish within the grace period, none is handed back).
- idle cost: one idle worker's transactions per second on its database (pg_stat_database),
  with the lease and with the lease's renewal pushed out of the window; the difference is
  the lease's own cost.

Medians over the rounds are printed.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import psycopg  # noqa: E402

from helix_dbos._client.queues import EnqueuedRun, RunEnqueuer  # noqa: E402
from helix_dbos._database import libpq_url, render_url, resolve_database_url  # noqa: E402

CLI = "from helix_dbos._cli import main; main()"
RUNS = 8
IDLE_SECONDS = 20.0


@contextmanager
def bench_database(server_url: str) -> Iterator[str]:
    """A new migrated database on the server, dropped on exit."""
    from helix_dbos._store.migrations import migrate

    name = f"helix_bench_leases_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    with psycopg.connect(libpq_url(server_url), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = render_url(server_url, database=name)
    try:
        migrate(url)
        yield url
    finally:
        with psycopg.connect(libpq_url(server_url), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def start_worker(url: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], str]:
    """A worker with a generated executor id, once it listens; and that id."""
    proc = subprocess.Popen(
        [sys.executable, "-c", CLI, "worker", "--app", "bench_workers:make_app", "--concurrency", str(RUNS),
         "--polling-interval", "0.05"],
        cwd=HERE, env={**os.environ, "HELIX_BENCH_WORKERS_URL": url, **(env or {})}, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("worker "):
        raise RuntimeError(f"worker did not start (exit {proc.poll()}): {line!r}")
    return proc, line.split()[1]


def runs_in_flight(url: str, enqueuer: RunEnqueuer, turns: int, executor_id: str) -> list[EnqueuedRun]:
    """``RUNS`` runs of ``turns`` turns, once ``executor_id`` runs them all."""
    runs = [enqueuer.enqueue("bench-agent", f"turns={turns}", session_id=f"bl-{uuid.uuid4().hex[:10]}")
            for _ in range(RUNS)]
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        while conn.execute("SELECT count(*) FROM dbos.workflow_status WHERE status = 'PENDING' AND executor_id = %s",
                           (executor_id,)).fetchone()[0] < RUNS:
            time.sleep(0.02)
    return runs


def adoption_round(url: str) -> tuple[float, float]:
    """Seconds from SIGKILL to adoption, and to the last run's end."""
    a, a_id = start_worker(url)
    b = None
    try:
        with RunEnqueuer(url) as enqueuer:
            runs = runs_in_flight(url, enqueuer, 100, a_id)
            b, _ = start_worker(url)
            a.kill()
            killed = time.time()
            for run in runs:
                assert enqueuer.result(run, timeout=120, poll_interval=0.05).status == "completed"
            done = time.time()
        with psycopg.connect(libpq_url(url)) as conn:
            adopted_at = conn.execute("SELECT extract(epoch FROM adopted_at) FROM helix.workers WHERE executor_id = %s",
                                      (a_id,)).fetchone()[0]
        return float(adopted_at) - killed, done - killed
    finally:
        for proc in (a, b):
            if proc is not None:
                proc.kill()
                proc.wait()


def drain_round(url: str) -> float:
    """Seconds from SIGTERM to the worker's exit, with runs in flight."""
    a, a_id = start_worker(url)
    with RunEnqueuer(url) as enqueuer:
        runs = runs_in_flight(url, enqueuer, 5, a_id)
        a.send_signal(signal.SIGTERM)
        started = time.monotonic()
        a.wait(60)
        took = time.monotonic() - started
        for run in runs:
            assert enqueuer.result(run, timeout=60, poll_interval=0.05).status == "completed"
    return took


def idle_commits_per_second(url: str, env: dict[str, str] | None = None) -> float:
    """Transactions per second on ``url`` with one idle worker."""
    proc, _ = start_worker(url, env)
    try:
        time.sleep(3)
        with psycopg.connect(libpq_url(url), autocommit=True) as conn:
            def commits() -> int:
                conn.execute("SELECT pg_stat_clear_snapshot()")
                return int(conn.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")
                           .fetchone()[0])
            before = commits()
            time.sleep(IDLE_SECONDS)
            after = commits()
        return (after - before - 2) / IDLE_SECONDS  # this connection's own two reads
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


def run(server_url: str | None = None, rounds: int = 3) -> dict[str, float]:
    server_url = resolve_database_url(server_url)
    adoption, finished, drains, with_lease, without_lease = [], [], [], [], []
    for _ in range(rounds):
        with bench_database(server_url) as url:
            latency, done = adoption_round(url)
            adoption.append(latency)
            finished.append(done)
        with bench_database(server_url) as url:
            drains.append(drain_round(url))
    with bench_database(server_url) as url:
        with_lease.append(idle_commits_per_second(url))
    with bench_database(server_url) as url:
        without_lease.append(idle_commits_per_second(url, {"HELIX_LEASE_TTL": "2000", "HELIX_LEASE_RENEW": "1000"}))
    return {
        "adoption_s": statistics.median(adoption), "all_done_s": statistics.median(finished),
        "drain_s": statistics.median(drains), "idle_tps": with_lease[0], "idle_tps_no_renewal": without_lease[0],
    }


def report(figures: dict[str, float]) -> None:
    print("worker leases (default lease 10 s, renewed every 2 s)")
    print(f"  adoption after SIGKILL: {figures['adoption_s']:.1f} s (median); {RUNS} runs in flight all completed"
          f" {figures['all_done_s']:.1f} s after the kill")
    print(f"  drain after SIGTERM with {RUNS} runs in flight: {figures['drain_s']:.1f} s (median)")
    lease = figures["idle_tps"] - figures["idle_tps_no_renewal"]
    print(f"  idle worker: {figures['idle_tps']:.1f} transactions/s, of which the lease {lease:.1f}/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--quick", action="store_true", help="one round")
    args = parser.parse_args()
    report(run(args.database_url, rounds=args.rounds or (1 if args.quick else 3)))


if __name__ == "__main__":
    main()
