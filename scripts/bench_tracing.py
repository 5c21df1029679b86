"""What tracing costs per turn: bench.py's workload with tracing off and on, side by side.

    python scripts/bench_tracing.py [--database-url URL] [--rounds N] [--quick]

Three modes, each in a process of its own (OpenTelemetry lets a process set its global
``TracerProvider`` once), on one database, all three launched before the first run:

  - ``off``: no ``TracerProvider`` is set, so helix's tracer is the OpenTelemetry API's
    no-op (what an app that does not configure tracing gets);
  - ``simple``: an SDK ``TracerProvider`` with a ``SimpleSpanProcessor`` into an
    ``InMemorySpanExporter`` (every span is exported on the thread that ends it);
  - ``batch``: the same with a ``BatchSpanProcessor`` (spans are exported from a
    background thread).

The workload is scripts/bench.py's (one run = K turns of two parallel tool calls, one of
which appends to the state; an instant scripted model), K = 20 and K = 200. The parent
asks the modes for one run at a time, in turn, for ``--rounds`` rounds (the order
rotates each round), so every mode sees the same machine and database; only one process
works at a time. It prints each mode's median microseconds per turn, its ratio to
``off``, and the spans a turn exported (checked: ``off`` none, the others the same).

It runs on a database of its own (created on the server of --database-url, else the
embedded Postgres, and dropped at the end). ``scripts/bench.py`` runs it too.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

MODES = ("off", "simple", "batch")
TURNS = (20, 200)


def spans_of_turns(turns: int) -> float:
    """Seconds for ``turns`` turns of helix's observation points alone, as bench.py's
    workload makes them (a step with a model call, two tool calls and a commit), on no
    database: what tracing adds to a turn, without the engine's noise around it."""
    from types import SimpleNamespace

    from helix_dbos.observability import points

    result = SimpleNamespace(type="tool_calls", stop_reason=None)
    usage = SimpleNamespace(input_tokens=100, output_tokens=20, cost_usd=None)
    done = SimpleNamespace(success=True, result={"ok": True})
    committed = SimpleNamespace(replayed=False, refused=None)
    started = time.perf_counter()
    for turn in range(1, turns + 1):
        with points.step("bench-agent", turn):
            with points.model_call("mock", "bench") as answer:
                answer(result, usage)
            for name in ("record", "lookup"):
                with points.tool_call(name, f"{name}{turn}") as outcome:
                    outcome(done)
            with points.commit(turn, None) as commit:
                commit.outcome(committed)
    return time.perf_counter() - started


def child(mode: str, url: str) -> None:
    """One mode's process: set its tracer provider, launch DBOS, then answer the parent's
    lines: ``K`` runs one run of K turns and prints ``seconds spans``; ``points K``
    times K turns of observation points alone (:func:`spans_of_turns`)."""
    exporter = None
    processor = None
    if mode != "off":
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        exporter = InMemorySpanExporter()
        processor = SimpleSpanProcessor(exporter) if mode == "simple" else BatchSpanProcessor(exporter)
        provider = TracerProvider()
        provider.add_span_processor(processor)
        trace.set_tracer_provider(provider)

    from dbos import DBOS

    from bench import InstantModel, agent, run_agent
    from helix_dbos import DBOSAgentExecutor
    from helix_dbos._client.launcher import dbos_config

    DBOS(config=dbos_config(url, name="helix-bench-tracing", notification_listener_polling_interval_sec=0.01))
    executor = DBOSAgentExecutor(llm=InstantModel(), database_url=url)
    executor.register(agent)
    DBOS.launch()
    try:
        for _ in range(3):
            run_agent(executor, 3)  # warm up
        if processor is not None:
            processor.force_flush()
            exporter.clear()  # type: ignore[union-attr]
        print("ready", flush=True)
        for line in sys.stdin:
            if line.startswith("points"):
                turns = int(line.split()[1])
                seconds = spans_of_turns(turns)
                if processor is not None:
                    processor.force_flush()
                    exporter.clear()  # type: ignore[union-attr]
                print(f"{seconds} 0", flush=True)
                continue
            turns = int(line)
            seconds = run_agent(executor, turns, f"trace-{mode}-{uuid.uuid4().hex[:8]}")
            spans = 0
            if processor is not None:
                processor.force_flush()  # after the clock stopped: what a batch exports later
                spans = len(exporter.get_finished_spans())  # type: ignore[union-attr]
                exporter.clear()  # type: ignore[union-attr]
            print(f"{seconds} {spans}", flush=True)
    finally:
        DBOS.destroy(destroy_registry=True)


class Mode:
    """A mode's process, driven line by line."""

    def __init__(self, mode: str, url: str) -> None:
        self.name = mode
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--child", mode, "--database-url", url],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if line.strip() != "ready":
            raise RuntimeError(f"mode {mode} did not start (exit {self.proc.poll()}): {line!r}")

    def run(self, turns: int, what: str = "") -> tuple[float, int]:
        """One run of ``turns`` turns (``what="points"``: the points alone); seconds and spans."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{what} {turns}\n".lstrip())
        self.proc.stdin.flush()
        seconds, spans = self.proc.stdout.readline().split()
        return float(seconds), int(spans)

    def stop(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


POINT_TURNS = 2000
"""Turns of observation points per timing (:func:`spans_of_turns`)."""


def run(server_url: str, rounds: int) -> dict[Any, dict[str, dict[str, float]]]:
    """Per K, per mode: ``us_per_turn`` (median over rounds) and ``spans_per_turn``; and
    under ``"points"``, per mode, the points' own ``us_per_turn``."""
    from bench import create_bench_database, drop_database
    from helix_dbos._store.migrations import migrate

    url, name = create_bench_database(server_url)
    modes: list[Mode] = []
    try:
        migrate(url)
        modes = [Mode(mode, url) for mode in MODES]
        figures: dict[Any, dict[str, dict[str, float]]] = {}
        for turns in TURNS:
            seconds: dict[str, list[float]] = {m.name: [] for m in modes}
            spans: dict[str, set[int]] = {m.name: set() for m in modes}
            for r in range(runs_at(turns, rounds)):
                for mode in modes[r % len(modes):] + modes[: r % len(modes)]:
                    took, exported = mode.run(turns)
                    seconds[mode.name].append(took)
                    spans[mode.name].add(exported)
            assert spans["off"] == {0}, spans
            assert len(spans["simple"]) == 1 and spans["simple"] == spans["batch"] and spans["simple"] != {0}, spans
            figures[turns] = {
                m: {"us_per_turn": statistics.median(s) / turns * 1e6, "spans_per_turn": spans[m].pop() / turns}
                for m, s in seconds.items()
            }
        points: dict[str, list[float]] = {m.name: [] for m in modes}
        for r in range(5):
            for mode in modes[r % len(modes):] + modes[: r % len(modes)]:
                points[mode.name].append(mode.run(POINT_TURNS, "points")[0])
        figures["points"] = {m: {"us_per_turn": statistics.median(s) / POINT_TURNS * 1e6} for m, s in points.items()}
        return figures
    finally:
        for mode in modes:
            mode.stop()
        time.sleep(0.5)
        drop_database(server_url, name)


def runs_at(turns: int, rounds: int) -> int:
    """Runs per mode at K = ``turns``: ``rounds`` at K = 20, a third as many at K = 200."""
    return rounds if turns == TURNS[0] else max(2, rounds // 3)


def report(figures: dict[Any, dict[str, dict[str, float]]], rounds: int) -> None:
    print(f"tracing (bench.py's workload, in-memory exporter; per mode the median of {runs_at(20, rounds)} runs at"
          f" K=20 and {runs_at(200, rounds)} at K=200, interleaved)")
    print(f"{'K':>6} {'mode':>7} {'us/turn':>9} {'vs off':>7} {'spans/turn':>11}")
    for turns in TURNS:
        modes = figures[turns]
        off = modes["off"]["us_per_turn"]
        for mode, f in modes.items():
            print(f"{turns:>6} {mode:>7} {f['us_per_turn']:>9.0f} {f['us_per_turn'] / off:>7.3f} {f['spans_per_turn']:>11.1f}")
    points = figures["points"]
    off = points["off"]["us_per_turn"]
    print(f"observation points alone (a turn's step, model call, 2 tool calls and commit; {POINT_TURNS} turns, median of 5):")
    for mode, f in points.items():
        added = f["us_per_turn"] - off
        print(f"  {mode:>7} {f['us_per_turn']:>7.1f} us/turn" + ("" if mode == "off" else f"  (+{added:.1f} us,"
              f" {added / figures[20]['off']['us_per_turn']:.1%} of a K=20 turn)"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--rounds", type=int, default=30, help="runs per mode at K=20 (a third as many at K=200)")
    parser.add_argument("--quick", action="store_true", help="5 rounds (a smoke run)")
    parser.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.database_url)
        return
    from helix_dbos._database import resolve_database_url

    rounds = 5 if args.quick else args.rounds
    report(run(resolve_database_url(args.database_url), rounds), rounds)


if __name__ == "__main__":
    main()
