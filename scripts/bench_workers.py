"""Throughput of queued runs on 1, 2 and 4 ``helix-dbos worker`` processes.

    python scripts/bench_workers.py [--database-url URL] [--sessions N] [--quick]

Workload: scripts/bench.py's agent (each turn two tools in parallel, one appends to the
state, then ``__finish__``) with its scripted model answering after 50 ms, 5 turns per
run. Runs are enqueued from this process with :class:`RunEnqueuer` (no DBOS here) on a
queue with a per-worker concurrency of 8, so each worker adds 8 run slots (and about 15
database connections). For each worker count it prints runs per second from the first
enqueue to the last completion. More workers only help when CPU cores are free: on a
2-core machine the engine's CPU, not the run slots, is the limit.

Each worker count runs on a database of its own (created on the server of
--database-url, else the embedded Postgres, and dropped at the end). From another
script: ``import bench_workers; bench_workers.run(server_url)`` returns the figures.

The module is also the workers' app: ``helix-dbos worker --app bench_workers:make_app``.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

URL_VAR = "HELIX_BENCH_WORKERS_URL"
TURNS = 5
LATENCY = 0.05
PER_WORKER = 8
CLI = "from helix_dbos._cli import main; main()"


def make_app() -> Any:
    """The workers' app: DBOS on ``$HELIX_BENCH_WORKERS_URL`` and bench.py's agent (not launched)."""
    from dbos import DBOS

    import bench
    from helix_dbos import DBOSAgentExecutor
    from helix_dbos._client.launcher import dbos_config

    url = os.environ[URL_VAR]
    DBOS(config=dbos_config(url, name="helix-bench-workers", notification_listener_polling_interval_sec=0.01, sys_db_pool_size=5))
    executor = DBOSAgentExecutor(llm=bench.InstantModel(LATENCY), database_url=url)
    executor.register(bench.agent)
    return executor


def _start_worker(url: str, index: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CLI, "worker", "--app", "bench_workers:make_app", "--executor-id", f"bench-{index}",
         "--concurrency", str(PER_WORKER), "--polling-interval", "0.05"],
        cwd=HERE, env={**os.environ, URL_VAR: url}, text=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )


def _wait_ready(proc: subprocess.Popen[str]) -> None:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("worker "):
        raise RuntimeError(f"worker did not start (exit {proc.poll()}): {line!r}")


def measure(url: str, workers: int, sessions: int) -> float:
    """Runs per second of ``sessions`` queued runs on ``workers`` fresh worker processes."""
    from helix_dbos._client.queues import RunEnqueuer
    from helix_dbos._store.migrations import migrate

    migrate(url)
    procs = [_start_worker(url, 0)]
    try:
        _wait_ready(procs[0])  # the first one creates the DBOS tables
        procs += [_start_worker(url, i) for i in range(1, workers)]
        for proc in procs[1:]:
            _wait_ready(proc)
        with RunEnqueuer(url) as enqueuer:
            started = time.perf_counter()
            runs = [enqueuer.enqueue("bench-agent", f"turns={TURNS}", session_id=f"bw-{uuid.uuid4().hex[:10]}")
                    for _ in range(sessions)]
            for run in runs:
                result = enqueuer.result(run, timeout=600, poll_interval=0.02)
                assert result.status == "completed", result
            return sessions / (time.perf_counter() - started)
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()


def run(server_url: str | None = None, worker_counts: tuple[int, ...] = (1, 2, 4), sessions: int = 120) -> dict[int, float]:
    """Runs per second for each worker count, each on a fresh database (dropped after)."""
    import psycopg

    from helix_dbos._database import libpq_url, render_url, resolve_database_url

    server_url = resolve_database_url(server_url)
    figures: dict[int, float] = {}
    for count in worker_counts:
        name = f"helix_bench_workers_{os.getpid()}_{count}"
        with psycopg.connect(libpq_url(server_url), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')
        try:
            figures[count] = measure(render_url(server_url, database=name), count, sessions)
        finally:
            with psycopg.connect(libpq_url(server_url), autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    return figures


def report(figures: dict[int, float], sessions: int) -> None:
    print(f"queued runs: {sessions} sessions, {TURNS} turns each, model latency {LATENCY * 1000:.0f} ms,"
          f" per-worker concurrency {PER_WORKER}")
    print(f"{'workers':>7} {'runs/s':>8} {'turns/s':>8} {'speedup':>8}")
    base = figures[min(figures)]
    for count, rate in figures.items():
        print(f"{count:>7} {rate:>8.1f} {rate * TURNS:>8.0f} {rate / base:>7.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--sessions", type=int, default=None)
    parser.add_argument("--quick", action="store_true", help="60 sessions per worker count")
    args = parser.parse_args()
    sessions = args.sessions or (60 if args.quick else 120)
    report(run(args.database_url, sessions=sessions), sessions)


if __name__ == "__main__":
    main()
