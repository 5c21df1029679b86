"""What each of helix's own writes adds to a turn: the whole turn, the turn with parts of
it left out, and the floor, interleaved in one process.

    python scripts/bench_parts.py [--database-url URL] [--turns 20] [--repeats 20]

The workload and the floor are ``bench.py``'s (K turns of two parallel tool calls, one
appending to the state, then ``__finish__``; an instant model). The variants replace a
part of helix for the measurement only, so their runs are not what helix would store:

- ``no attempt record``: the insert of the turn's tool attempts, started as the tools'
  steps begin and waited for by each body so that ``max_worker_losses`` can count a call
  that takes its worker down, does nothing;
- ``commit a bare statement``: the step commit runs the floor's bare statement instead of
  ``helix.commit_step`` (the step's messages, state patch and events are not built or
  written);
- ``neither write``: both.

It prints, for each, the median microseconds per turn, its difference from the whole
turn, this process's CPU per turn and the ratio to the floor. It runs on a database of its
own (created on the server of --database-url, else the embedded Postgres, and dropped at
the end).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dbos import DBOS

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import bench  # noqa: E402

from helix_dbos import DBOSAgentExecutor  # noqa: E402
from helix_dbos._client.launcher import dbos_config  # noqa: E402
from helix_dbos._database import resolve_database_url  # noqa: E402
from helix_dbos._durable.tool_execution import phases  # noqa: E402
from helix_dbos._store import writes  # noqa: E402
from helix_dbos._store.records import CommitOutcome  # noqa: E402

RECORD_ATTEMPTS = phases.record_attempts
COMMIT_STEP = writes.commit_step


def bare_commit(conn: Any, commit: Any) -> CommitOutcome:
    """The floor's step commit: one bare statement on the same pool."""
    conn.execute("SELECT 1")
    return CommitOutcome()


VARIANTS: dict[str, tuple[bool, bool]] = {  # name: (record attempts, commit with helix.commit_step)
    "whole turn": (True, True),
    "no attempt record": (False, True),
    "commit a bare statement": (True, False),
    "neither write": (False, False),
}


def use(attempts: bool, commit: bool) -> None:
    phases.record_attempts = RECORD_ATTEMPTS if attempts else (lambda *args: None)  # type: ignore[assignment]
    writes.commit_step = COMMIT_STEP if commit else bare_commit  # type: ignore[assignment]


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure(executor: DBOSAgentExecutor, floor: Any, turns: int, repeats: int) -> dict[str, tuple[float, float]]:
    """Median seconds and CPU seconds of a run of each variant and of the floor, interleaved."""
    def variant(attempts: bool, commit: bool) -> Callable[[], float]:
        def run() -> float:
            use(attempts, commit)
            return bench.run_agent(executor, turns)
        return run

    runs = {name: variant(*flags) for name, flags in VARIANTS.items()}
    runs["floor"] = lambda: bench.run_floor(floor, turns)
    for run in runs.values():  # warm up
        run()
    walls: dict[str, list[float]] = {name: [] for name in runs}
    cpus: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            started = cpu_seconds()
            walls[name].append(run())
            cpus[name].append(cpu_seconds() - started)
    use(True, True)
    return {name: (statistics.median(walls[name]), statistics.median(cpus[name])) for name in runs}


def report(figures: dict[str, tuple[float, float]], turns: int, repeats: int) -> None:
    print(f"parts of a helix turn (K = {turns}, medians of {repeats} interleaved runs of each)")
    print(f"{'variant':<26} {'us/turn':>9} {'vs whole':>9} {'cpu us/turn':>12} {'x floor':>8}")
    whole, floor = figures["whole turn"][0], figures["floor"][0]
    for name, (wall, cpu) in figures.items():
        us = wall / turns * 1e6
        print(f"{name:<26} {us:>9.0f} {us - whole / turns * 1e6:>+9.0f} {cpu / turns * 1e6:>12.0f} {wall / floor:>8.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    server_url = resolve_database_url(args.database_url)
    url, name = bench.create_bench_database(server_url)
    try:
        DBOS(config=dbos_config(url, name="helix-bench-parts"))
        executor = DBOSAgentExecutor(llm=bench.InstantModel(), database_url=url)
        executor.register(bench.agent)
        floor = bench.floor_workflow_factory(executor)
        DBOS.launch()
        report(measure(executor, floor, args.turns, args.repeats), args.turns, args.repeats)
    finally:
        DBOS.destroy(destroy_registry=True)
        bench.drop_database(server_url, name)


if __name__ == "__main__":
    main()
