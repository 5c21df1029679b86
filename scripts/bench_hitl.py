"""Human-in-the-loop at scale: runs waiting for approval hold no queue slot.

    python scripts/bench_hitl.py [--database-url URL] [--waiting N] [--quick]

One ``helix-dbos worker`` process with a per-worker concurrency of 4. ``N`` sessions
(default 1,000) each reach a call that needs approval and park: the run's workflow ends
and a waiter workflow per session waits on ``DBOS.recv``. It prints:

  - how fast new runs complete (scripts/bench.py's agent, 5 turns, model latency 50 ms)
    with no run waiting, then with the N waiting, and the ratio (target >= 90%);
  - the worker's resident memory (RSS) with nothing waiting and with the N waiters
    (target <= 250 MB);
  - the time for all N to finish after another process approves them all, and how long
    the approvals themselves took.

It runs on a database of its own (created on the server of --database-url, else the
embedded Postgres, and dropped at the end). The module is also the worker's app:
``helix-dbos worker --app bench_hitl:make_app``; ``python bench_hitl.py --approve-all URL``
is the approving process.
"""

from __future__ import annotations

import argparse
import asyncio
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

URL_VAR = "HELIX_BENCH_HITL_URL"
CONCURRENCY = 4
TURNS = 5
LATENCY = 0.05
CLI = "from helix_dbos._cli import main; main()"


def make_app() -> Any:
    """The worker's app: bench.py's agent and ``gated-agent`` (one call that needs approval)."""
    from dbos import DBOS
    from pydantic import BaseModel

    import bench
    from helix_dbos import DBOSAgentExecutor, define_agent, tool
    from helix_dbos._client.launcher import dbos_config
    from helix_dbos.types import AssistantMessage, ToolCallsStepResult

    class Published(BaseModel):
        ok: bool

    @tool(require_approval=True)
    def publish(text: str) -> dict:
        """Publish a text (needs approval)."""
        return {"published": text}

    class Model(bench.InstantModel):
        async def generate_step(self, messages: Any, tools: Any, llm_config: Any, output_schema: Any = None) -> Any:
            if not any(t.name == "publish" for t in tools):
                return await super().generate_step(messages, tools, llm_config, output_schema)
            await asyncio.sleep(self.latency)
            if any(isinstance(m, AssistantMessage) for m in messages):
                call = {"id": "fin", "name": "__finish__", "arguments": {"ok": True}}
            else:
                call = {"id": "pub", "name": "publish", "arguments": {"text": "hello"}}
            return ToolCallsStepResult(tool_calls=[call]), bench.Usage(input_tokens=100, output_tokens=20, total_tokens=120)

    url = os.environ[URL_VAR]
    DBOS(config=dbos_config(url, name="helix-bench-hitl", notification_listener_polling_interval_sec=0.01))
    executor = DBOSAgentExecutor(llm=Model(LATENCY), database_url=url)
    executor.register(bench.agent, define_agent("gated-agent", system_prompt="Publish.", tools=[publish],
                                                output_schema=Published))
    return executor


def approve_all(url: str) -> None:
    """Approve every pending call, from this process (one pool, one DBOS client)."""
    from helix_dbos.answers import ApprovalResponse
    from helix_dbos._client import commands
    from helix_dbos._client.workflows import ClientWorkflows
    from helix_dbos._store import reads
    from helix_dbos._store.pools import create_pool

    pool = create_pool(url)
    with pool.connection() as conn:
        pending = reads.list_pending(conn)
    with ClientWorkflows(url) as workflows:
        for call in pending:
            commands.answer(pool, workflows, call.session_id, ApprovalResponse(tool_call_id=call.tool_call_id,
                                                                               approved=True, approver="bench"))
    pool.close()


def rss_mb(pid: int) -> float:
    """The resident memory of a process, in MB (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def new_runs_per_second(enqueuer: Any, sessions: int) -> float:
    started = time.perf_counter()
    runs = [enqueuer.enqueue("bench-agent", f"turns={TURNS}", session_id=f"new-{uuid.uuid4().hex[:10]}")
            for _ in range(sessions)]
    for run in runs:
        assert enqueuer.result(run, timeout=600, poll_interval=0.02).status == "completed"
    return sessions / (time.perf_counter() - started)


def count(url: str, sql: str) -> int:
    import psycopg

    from helix_dbos._database import libpq_url

    with psycopg.connect(libpq_url(url)) as conn:
        return int(conn.execute(sql).fetchone()[0])


def wait_until(url: str, sql: str, target: int, timeout: float = 900) -> float:
    """Seconds until ``sql`` counts ``target``."""
    started = time.perf_counter()
    while count(url, sql) < target:
        if time.perf_counter() - started > timeout:
            raise TimeoutError(f"{sql!r} did not reach {target} in {timeout}s")
        time.sleep(0.2)
    return time.perf_counter() - started


PARKED = "SELECT count(*) FROM dbos.workflow_status WHERE name = 'helix_await_answers' AND status = 'PENDING'"
FINISHED = "SELECT count(*) FROM helix.sessions WHERE agent_name = 'gated-agent' AND status = 'completed'"


def measure(url: str, waiting: int, new_sessions: int) -> dict[str, float]:
    from helix_dbos._client.queues import RunEnqueuer
    from helix_dbos._store.migrations import migrate

    migrate(url)
    proc = subprocess.Popen(
        [sys.executable, "-c", CLI, "worker", "--app", "bench_hitl:make_app", "--executor-id", "hitl-1",
         "--concurrency", str(CONCURRENCY), "--polling-interval", "0.05"],
        cwd=HERE, env={**os.environ, URL_VAR: url}, text=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().startswith("worker "), "the worker did not start"
        figures: dict[str, float] = {}
        with RunEnqueuer(url) as enqueuer:
            figures["rate_idle"] = new_runs_per_second(enqueuer, new_sessions)
            figures["rss_idle"] = rss_mb(proc.pid)
            for i in range(waiting):
                enqueuer.enqueue("gated-agent", "publish it", session_id=f"wait-{i:05d}")
            figures["park_seconds"] = wait_until(url, PARKED, waiting)
            figures["rate_waiting"] = new_runs_per_second(enqueuer, new_sessions)
            figures["rss_waiting"] = rss_mb(proc.pid)
        started = time.perf_counter()
        subprocess.run([sys.executable, __file__, "--approve-all", url], check=True)
        figures["approve_seconds"] = time.perf_counter() - started
        figures["finish_seconds"] = figures["approve_seconds"] + wait_until(url, FINISHED, waiting)
        return figures
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def run(server_url: str | None, waiting: int, new_sessions: int) -> dict[str, float]:
    import psycopg

    from helix_dbos._database import libpq_url, render_url, resolve_database_url

    server_url = resolve_database_url(server_url)
    name = f"helix_bench_hitl_{os.getpid()}"
    with psycopg.connect(libpq_url(server_url), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        return measure(render_url(server_url, database=name), waiting, new_sessions)
    finally:
        with psycopg.connect(libpq_url(server_url), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def report(f: dict[str, float], waiting: int, new_sessions: int) -> None:
    print(f"human-in-the-loop at scale: one worker, concurrency {CONCURRENCY}, {waiting} runs waiting for approval")
    print(f"  new runs ({new_sessions} x {TURNS} turns, model 50 ms): {f['rate_idle']:.1f} runs/s with none waiting,"
          f" {f['rate_waiting']:.1f} runs/s with {waiting} waiting ({f['rate_waiting'] / f['rate_idle']:.0%})")
    print(f"  worker RSS: {f['rss_idle']:.0f} MB idle, {f['rss_waiting']:.0f} MB with {waiting} waiters")
    print(f"  {waiting} runs parked in {f['park_seconds']:.1f} s; all finished {f['finish_seconds']:.1f} s after"
          f" another process began approving ({f['approve_seconds']:.1f} s to approve them all)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--waiting", type=int, default=None)
    parser.add_argument("--quick", action="store_true", help="200 waiting, 20 new runs")
    parser.add_argument("--approve-all", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.approve_all:
        approve_all(args.approve_all)
        return
    waiting = args.waiting or (200 if args.quick else 1000)
    new_sessions = 20 if args.quick else 60
    report(run(args.database_url, waiting, new_sessions), waiting, new_sessions)


if __name__ == "__main__":
    main()
