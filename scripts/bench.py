"""Benchmarks of helix-dbos: engine overhead, commits and bytes per turn, throughput.

    python scripts/bench.py [--database-url URL] [--quick] [--peers]

Workload (the one our peers' benchmarks use): one run = K model turns; each turn the
model calls two tools in parallel (one appends to the state), then ``__finish__``. The
model is scripted and answers instantly, so the time of a run is the engine's own.

It prints, for K = 20 and K = 200:
  - microseconds of engine overhead per turn, and the same for a bare DBOS workflow that
    makes exactly the same DBOS calls per turn with empty bodies (the floor), and the ratio;
  - Postgres commits per turn (pg_stat_database, read after the counts settle, DBOS's idle
    polling taken out) and bytes of the rows a run writes per turn;
then turns per second with 200 concurrent sessions whose model answers after 50 ms, the
state tracker figures (scripts/bench_state.py), runs per second on 1, 2 and 4 queue
worker processes (scripts/bench_workers.py), how soon a killed worker's runs are adopted,
how long a drain takes and what an idle worker's lease costs (scripts/bench_leases.py), what
tracing costs per turn, off and on (scripts/bench_tracing.py), how soon another process sees a run's
events and token deltas (scripts/bench_streaming.py, in a process of its own), and new
runs' rate, worker memory and approval time with 1,000 runs waiting for approval
(scripts/bench_hitl.py), and one server process with 1,000 SSE subscribers (threads,
connections, RSS) and the time from ``POST /chat`` to the first token delta
(scripts/bench_chat.py), and what an MCP tool call costs over a helix tool call and the
connections a run opens (scripts/bench_mcp.py); with
--peers, the side-by-side run with Pydantic AI + DBOS and LangGraph (scripts/bench_peers.py).

It runs on a database of its own (created on the server of --database-url, else the
embedded Postgres, and dropped at the end).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
from dbos import DBOS
from pydantic import BaseModel

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from helix_dbos import DBOSAgentExecutor, ToolContext, define_agent, tool  # noqa: E402
from helix_dbos._database import libpq_url, render_url, resolve_database_url  # noqa: E402
from helix_dbos._client.launcher import dbos_config  # noqa: E402
from helix_dbos.types import Message, ToolCallsStepResult, ToolSpec, Usage  # noqa: E402


class Notes(BaseModel):
    notes: list[str] = []


class Done(BaseModel):
    turns: int


@tool
async def record(turn: int, ctx: ToolContext) -> dict:
    """Append a note to the state."""
    ctx.update_state(lambda d: d.notes.append(f"note {turn}"))
    return {"ok": True}


@tool
async def lookup(turn: int) -> dict:
    """Look something up (no state change)."""
    return {"turn": turn}


def respond(messages: list[Message], tools: list[ToolSpec]) -> ToolCallsStepResult:
    """K turns of two tool calls, then ``__finish__``; K is in the first user message.

    O(1) per call: the transcript is [system, user, (assistant, tool, tool) * turns].
    """
    turns = int(str(messages[1].content).split("=")[1])
    turn = (len(messages) - 2) // 3 + 1
    if turn > turns:
        return ToolCallsStepResult(tool_calls=[{"id": "fin", "name": "__finish__", "arguments": {"turns": turns}}])
    return ToolCallsStepResult(
        tool_calls=[
            {"id": f"r{turn}", "name": "record", "arguments": {"turn": turn}},
            {"id": f"l{turn}", "name": "lookup", "arguments": {"turn": turn}},
        ]
    )


class InstantModel:
    """A scripted model that answers at once with fixed usage (no per-call cost of its own)."""

    def __init__(self, latency: float = 0.0) -> None:
        self.latency = latency

    async def generate_step(
        self, messages: list[Message], tools: list[ToolSpec], llm_config: Any, output_schema: Any = None
    ) -> tuple[ToolCallsStepResult, Usage]:
        if self.latency:
            await asyncio.sleep(self.latency)
        return respond(messages, tools), Usage(input_tokens=100, output_tokens=20, total_tokens=120)


agent = define_agent(
    name="bench-agent", system_prompt="Benchmark.", tools=[record, lookup], output_schema=Done,
    state_schema=Notes, max_steps=1000,
)


# --- the floor: the same DBOS calls per turn, empty bodies -------------------------------

async def _empty_step() -> None:
    return None


def floor_workflow_factory(executor: DBOSAgentExecutor) -> Any:
    """helix's call shape with empty bodies: a datasource transaction to begin the run, then
    per turn an ``llm`` step, two tool steps in parallel and one autocommit statement on
    the step commit's pool (the step commit, which is no DBOS operation)."""
    empty_tx = executor.runtime.datasource.transaction(name="floor_tx", isolation_level="READ COMMITTED")(lambda: None)
    statements = executor.runtime.statements  # the step commit's pool: one autocommit statement

    def plain_commit() -> None:
        with statements.connection() as conn:
            conn.execute("SELECT 1")

    @DBOS.workflow(name="bench_floor")
    async def floor(turns: int) -> int:
        await asyncio.to_thread(empty_tx)  # begin
        for _ in range(turns + 1):
            await DBOS.run_step_async({"name": "llm"}, _empty_step)
            reservations = [DBOS.reserve_step() for _ in range(2)] if _ < turns else []
            await asyncio.gather(*(r.run_async({"name": "tool"}, _empty_step) for r in reservations))
            await asyncio.to_thread(plain_commit)  # commit
        return turns

    return floor


# --- measurement --------------------------------------------------------------------------

ROW_BYTES_SQL = """
WITH s AS (SELECT num FROM helix.sessions WHERE id = %(s)s)
SELECT (SELECT coalesce(sum(pg_column_size(t.*)), 0) FROM helix.messages t, s WHERE session_num = s.num)
     + (SELECT coalesce(sum(pg_column_size(t.*)), 0) FROM helix.events t, s WHERE session_num = s.num)
     + (SELECT coalesce(sum(pg_column_size(t.*)), 0) FROM helix.state_patches t, s WHERE session_num = s.num)
     + (SELECT coalesce(sum(pg_column_size(t.*)), 0) FROM helix.state_snapshots t, s WHERE session_num = s.num)
     + (SELECT coalesce(sum(pg_column_size(t.*)), 0) FROM dbos.operation_outputs t WHERE workflow_uuid = %(w)s)
"""


QUIET_SECONDS = 11.0
"""How long to wait before reading pg_stat_database: a backend reports its counts when a
transaction ends at least a second after its last report, else once it has been idle
for 10 s."""


class Counters:
    """Commits of the benchmark database (pg_stat_database) and bytes of the rows a run wrote."""

    def __init__(self, url: str) -> None:
        self.conn = psycopg.connect(libpq_url(url), autocommit=True)

    def commits(self) -> int:
        self.conn.execute("SELECT pg_stat_clear_snapshot()")
        row = self.conn.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()").fetchone()
        return int(row[0])

    def row_bytes(self, session_id: str) -> int:
        row = self.conn.execute(ROW_BYTES_SQL, {"s": session_id, "w": f"helix:{session_id}:run:1"}).fetchone()
        return int(row[0])


def run_agent(executor: DBOSAgentExecutor, turns: int, session_id: str | None = None) -> float:
    started = time.perf_counter()
    session_id = session_id or f"bench-{uuid.uuid4().hex[:8]}"
    result = executor.execute(agent, f"turns={turns}", session_id=session_id).result(timeout=600, poll_interval=0.005)
    assert result.status == "completed", result
    return time.perf_counter() - started


def run_floor(floor: Any, turns: int) -> float:
    started = time.perf_counter()
    assert DBOS.start_workflow(floor, turns).get_result() == turns
    return time.perf_counter() - started


def per_turn(seconds: list[float], turns: int) -> float:
    return statistics.median(seconds) / turns * 1e6


def measure_overhead(executor: DBOSAgentExecutor, floor: Any, counters: Counters, turns: int, repeats: int) -> dict[str, float]:
    run_agent(executor, 3)
    run_floor(floor, 3)  # warm up
    ours, bare = [], []
    for _ in range(repeats):  # interleaved, so both see the same machine
        ours.append(run_agent(executor, turns))
        bare.append(run_floor(floor, turns))
    session_id = f"bytes-{uuid.uuid4().hex[:8]}"
    return {
        "us_per_turn": per_turn(ours, turns),
        "floor_us_per_turn": per_turn(bare, turns),
        "commits_per_turn": commits_of_run(counters, lambda: run_agent(executor, turns, session_id)) / turns,
        "bytes_per_turn": counters.row_bytes(session_id) / turns,
    }


def commits_of_run(counters: Counters, run: Any) -> float:
    """The commits ``run()`` makes: the count's growth across it, read after quiet
    windows, less DBOS's idle polling (its rate measured in one more quiet window)."""
    time.sleep(QUIET_SECONDS)
    before = counters.commits()
    seconds = run()
    time.sleep(QUIET_SECONDS)
    after = counters.commits()
    time.sleep(QUIET_SECONDS)
    idle_per_second = (counters.commits() - after) / QUIET_SECONDS
    return after - before - idle_per_second * (seconds + QUIET_SECONDS)


def measure_throughput(executor: DBOSAgentExecutor, sessions: int, turns: int, latency: float) -> float:
    executor.llm = InstantModel(latency)
    started = time.perf_counter()
    handles = [executor.execute(agent, f"turns={turns}", session_id=f"tp-{uuid.uuid4().hex[:10]}") for _ in range(sessions)]
    for handle in handles:
        assert handle.result(timeout=900).status == "completed"
    elapsed = time.perf_counter() - started
    executor.llm = InstantModel()
    return sessions * turns / elapsed


def create_bench_database(server_url: str) -> tuple[str, str]:
    name = f"helix_bench_{os.getpid()}"
    with psycopg.connect(libpq_url(server_url), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return render_url(server_url, database=name), name


def drop_database(server_url: str, name: str) -> None:
    with psycopg.connect(libpq_url(server_url), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--quick", action="store_true", help="fewer repeats and sessions (a smoke run)")
    parser.add_argument("--peers", action="store_true",
                        help="also the side-by-side run with Pydantic AI + DBOS and LangGraph (scripts/bench_peers.py)")
    args = parser.parse_args()
    server_url = resolve_database_url(args.database_url)
    url, name = create_bench_database(server_url)
    try:
        DBOS(config=dbos_config(url, name="helix-bench", notification_listener_polling_interval_sec=0.01))
        executor = DBOSAgentExecutor(llm=InstantModel(), database_url=url)
        executor.register(agent)
        floor = floor_workflow_factory(executor)
        DBOS.launch()
        report(executor, floor, Counters(url), quick=args.quick)
    finally:
        DBOS.destroy(destroy_registry=True)
        drop_database(server_url, name)
    import bench_workers

    sessions = 40 if args.quick else 120
    bench_workers.report(bench_workers.run(server_url, sessions=sessions), sessions)
    import bench_leases

    bench_leases.report(bench_leases.run(server_url, rounds=1 if args.quick else 3))
    import bench_tracing

    rounds = 5 if args.quick else 30
    bench_tracing.report(bench_tracing.run(server_url, rounds=rounds), rounds)
    streaming = [sys.executable, str(Path(__file__).with_name("bench_streaming.py")), "--database-url", server_url]
    subprocess.run(streaming + (["--quick"] if args.quick else []), check=True)
    hitl = [sys.executable, str(Path(__file__).with_name("bench_hitl.py")), "--database-url", server_url]
    subprocess.run(hitl + (["--quick"] if args.quick else []), check=True)
    chat = [sys.executable, str(Path(__file__).with_name("bench_chat.py")), "--database-url", server_url]
    subprocess.run(chat + (["--subscribers", "100", "--samples", "5"] if args.quick else []), check=True)
    mcp = [sys.executable, str(Path(__file__).with_name("bench_mcp.py")), "--database-url", server_url]
    subprocess.run(mcp + (["--quick"] if args.quick else []), check=True)
    if args.peers:
        peers = [sys.executable, str(Path(__file__).with_name("bench_peers.py")), "--database-url", server_url]
        subprocess.run(peers + (["--rounds", "1", "--runs", "2"] if args.quick else []), check=True)


def report(executor: DBOSAgentExecutor, floor: Any, counters: Counters, quick: bool) -> None:
    repeats = 2 if quick else 5
    print("engine overhead (instant model, 2 tools per turn, one appends to state)")
    print(f"{'K':>5} {'us/turn':>9} {'floor us/turn':>14} {'ratio':>6} {'commits/turn':>13} {'bytes/turn':>11}")
    figures = {}
    for turns in (20, 200):
        f = measure_overhead(executor, floor, counters, turns, repeats if turns == 20 else max(1, repeats // 2))
        figures[turns] = f
        print(
            f"{turns:>5} {f['us_per_turn']:>9.0f} {f['floor_us_per_turn']:>14.0f} "
            f"{f['us_per_turn'] / f['floor_us_per_turn']:>6.2f} {f['commits_per_turn']:>13.1f} {f['bytes_per_turn']:>11.0f}"
        )
    print(f"bytes/turn K=200 vs K=20: {figures[200]['bytes_per_turn'] / figures[20]['bytes_per_turn']:.2f}x")
    sessions = 40 if quick else 200
    rate = measure_throughput(executor, sessions, turns=5, latency=0.05)
    print(f"throughput: {rate:.0f} turns/s with {sessions} concurrent sessions, model latency 50 ms, 5 turns each")
    import bench_state

    print("state tracker (us per tracked update: append one item + set one scalar, delta mode)")
    state = bench_state.run()
    for n, us in state["us_per_update"].items():
        print(f"  {n:>7} items: {us:.1f} us")
    print(f"  ratio 100,000 / 10 items: {state['ratio_100k_to_10']:.2f}x")


if __name__ == "__main__":
    main()
