"""Live streaming latency: how long until another process sees what a run just did.

    python scripts/bench_streaming.py [--database-url URL] [--quick]

Two figures, each as p50 / p99 / max over every sample, measured by a watcher in another
process (``follow_events`` as ``helix-dbos tail`` and ``executor.stream`` use it) with
``time.monotonic()``, which is one system-wide clock on Linux:

  - durable events: from the model's answer (the moment the model returns its tool call)
    to the ``tool_call`` event seen by the watcher, and from a tool's return to its
    ``tool_result`` seen; one session of 200 steps, one 10 ms tool call per step;
  - token deltas: from the moment a streaming stub model server on 127.0.0.1 writes a
    chunk (OpenAI SSE format, real HTTP, read by the LiteLLM adapter) to the same delta
    seen by the watcher; 10 turns of 30 chunks 5 ms apart.

It runs on a database of its own (created on the server of --database-url, else the
embedded Postgres, and dropped at the end). ``scripts/bench.py`` runs it too.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "tests"))  # the streaming stub model server

from llm_stub_server import StubLLMServer, openai_stream  # noqa: E402

from helix_dbos import define_agent, launch_standalone, shutdown, tool  # noqa: E402
from helix_dbos._database import libpq_url, render_url, resolve_database_url  # noqa: E402
from helix_dbos.llm import LiteLLMAdapter  # noqa: E402
from helix_dbos.types import LLMConfig, Message, TextStepResult, ToolCallsStepResult, ToolSpec, Usage  # noqa: E402

WATCHER = """
import json, sys, time
from helix_dbos._client.streams import follow_events
from helix_dbos._store.pools import create_pool

url, session_id = sys.argv[1], sys.argv[2]
print("listening", flush=True)
for item in follow_events(url, session_id, pool=create_pool(url), until_run_end=False, idle_timeout=3,
                          deltas=True):
    seen = time.monotonic()
    if item.type == "delta":
        print(json.dumps({"t": seen, "type": "delta", "text": item.text}), flush=True)
    else:
        print(json.dumps({"t": seen, "type": item.type, "call": item.data.get("tool_call_id")}), flush=True)
"""

TOOL_SECONDS = 0.01
answered_at: dict[str, float] = {}
returned_at: dict[str, float] = {}


@tool
async def work(n: int) -> dict:
    """Do 10 ms of work."""
    await asyncio.sleep(TOOL_SECONDS)
    returned_at[f"w{n}"] = time.monotonic()
    return {"n": n}


class StepsModel:
    """One ``work`` call per step for ``steps`` steps, then text; notes when it answered."""

    def __init__(self, steps: int) -> None:
        self.steps = steps

    async def generate_step(
        self, messages: list[Message], tools: list[ToolSpec], llm_config: Any, output_schema: Any = None
    ) -> tuple[ToolCallsStepResult | TextStepResult, Usage]:
        n = sum(m.role == "assistant" for m in messages) + 1
        usage = Usage(input_tokens=10, output_tokens=5, total_tokens=15)
        if n > self.steps:
            return TextStepResult(content="done"), usage
        answered_at[f"w{n}"] = time.monotonic()
        return ToolCallsStepResult(tool_calls=[{"id": f"w{n}", "name": "work", "arguments": {"n": n}}]), usage


events_agent = define_agent(name="stream-bench-events", tools=[work], max_steps=1000)
deltas_agent = define_agent(name="stream-bench-deltas", llm_config=LLMConfig(model="openai/gpt-4o"))


def watch(url: str, session_id: str) -> subprocess.Popen[str]:
    """The watcher process, once it listens."""
    proc = subprocess.Popen([sys.executable, "-c", WATCHER, url, session_id], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "listening"
    time.sleep(0.5)  # its first read (and LISTEN) happens right after it prints
    return proc


def seen_by(proc: subprocess.Popen[str]) -> list[dict[str, Any]]:
    """Everything the watcher printed (it exits after 3 s without news)."""
    out, _ = proc.communicate(timeout=120)
    return [json.loads(line) for line in out.splitlines()]


def percentiles(samples: list[float]) -> str:
    ms = sorted(s * 1000 for s in samples)
    p99 = ms[min(len(ms) - 1, round(0.99 * (len(ms) - 1)))]
    return f"p50 {statistics.median(ms):6.1f} ms  p99 {p99:6.1f} ms  max {ms[-1]:6.1f} ms  ({len(ms)} samples)"


def measure_events(executor: Any, url: str, steps: int) -> tuple[list[float], list[float]]:
    executor.llm = StepsModel(steps)
    session_id = f"events-{uuid.uuid4().hex[:8]}"
    watcher = watch(url, session_id)
    assert executor.execute(events_agent, "go", session_id=session_id).result(timeout=600).status == "completed"
    seen = seen_by(watcher)
    calls = [e["t"] - answered_at[e["call"]] for e in seen if e["type"] == "tool_call"]
    results = [e["t"] - returned_at[e["call"]] for e in seen if e["type"] == "tool_result"]
    assert len(calls) == len(results) == steps, (len(calls), len(results))
    return calls, results


def measure_deltas(executor: Any, url: str, turns: int, pieces: int) -> list[float]:
    session_id = f"deltas-{uuid.uuid4().hex[:8]}"
    with StubLLMServer() as stub:
        executor.llm = LiteLLMAdapter(api_base=stub.openai_base, api_key="sk-bench")
        answers = [[f"t{turn:02d}.{i:03d} " for i in range(pieces)] for turn in range(turns)]
        responses = [openai_stream(content=texts, chunk_delay=0.005) for texts in answers]
        stub.add(openai_stream(content=["warm-up"]), *responses)
        assert executor.execute(deltas_agent, "warm up").result(timeout=600).status == "completed"  # imports litellm
        watcher = watch(url, session_id)
        for _ in range(turns):
            assert executor.execute(deltas_agent, "go", session_id=session_id).result(timeout=600).status == "completed"
        seen = {e["text"]: e["t"] for e in seen_by(watcher) if e["type"] == "delta"}
    sent = {text: at for texts, r in zip(answers, responses) for text, at in zip(texts, r.sent_at[1:])}
    assert set(seen) == set(sent), "every chunk's delta must reach the watcher"
    return [seen[text] - sent[text] for text in sent]


def run(server_url: str | None, quick: bool = False) -> dict[str, list[float]]:
    server = resolve_database_url(server_url, allow_embedded=True)
    name = f"helix_bench_stream_{os.getpid()}"
    with psycopg.connect(libpq_url(server), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = render_url(server, database=name)
    try:
        executor = launch_standalone(
            StepsModel(0), agents=[events_agent, deltas_agent], database_url=url, name="helix-bench-stream",
            notification_listener_polling_interval_sec=0.01,
        )
        calls, results = measure_events(executor, url, 50 if quick else 200)
        deltas = measure_deltas(executor, url, 3 if quick else 10, 30)
        shutdown()
    finally:
        with psycopg.connect(libpq_url(server), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    return {"tool_call": calls, "tool_result": results, "delta": deltas}


def report(figures: dict[str, list[float]]) -> None:
    print("live streaming latency, seen by another process (LISTEN/NOTIFY)")
    print(f"  model answer -> tool_call event:  {percentiles(figures['tool_call'])}")
    print(f"  tool return  -> tool_result event: {percentiles(figures['tool_result'])}")
    print(f"  stub server chunk -> token delta: {percentiles(figures['delta'])}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--quick", action="store_true", help="fewer samples (a smoke run)")
    args = parser.parse_args()
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    report(run(args.database_url, args.quick))


if __name__ == "__main__":
    main()
