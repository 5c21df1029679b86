"""Chat and SSE at scale on one server process (``helix-dbos serve``, tests/apps/chat_app.py).

    python scripts/bench_chat.py [--database-url URL] [--subscribers 1000] [--samples 20]

Two figures:

  - ``--subscribers`` concurrent ``GET /sse?follow=true`` clients of one session on one
    server process: the process's threads, its Postgres connections and its RSS before
    and while they are connected, and how long after a new run's ``finish`` commits every
    client has it (the fan-out of one listening connection);
  - time to first token: from sending ``POST /chat`` (a new chat whose model answers at
    once, streaming 4-character deltas) to its first ``text-delta`` chunk read by the
    client, p50 / p99 over ``--samples`` chats.

It runs on a database of its own (created on the server of --database-url, else
$HELIX_TEST_DATABASE_URL, and dropped at the end). ``scripts/bench.py`` runs it too.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import psycopg

from helix_dbos._database import libpq_url, render_url, resolve_database_url

HERE = Path(__file__).resolve().parent
APPS = HERE.parent / "tests" / "apps"
HELIX = Path(sys.executable).with_name("helix-dbos")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def process_figures(pid: int, url: str) -> dict[str, float]:
    """Threads and RSS (MiB) of process ``pid``, and the connections to the bench database."""
    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    fields = {line.split(":")[0]: line.split(":")[1].split() for line in status if ":" in line}
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    return {"threads": float(fields["Threads"][0]), "rss_mib": int(fields["VmRSS"][0]) / 1024, "connections": float(row[0])}


async def first_chat(client: httpx.AsyncClient, chat_id: str, text: str = "Just answer: hi") -> float:
    """Seconds from sending ``POST /chat`` to the first text delta; reads the stream to its end."""
    body = {"id": chat_id, "agent": "chat-weather", "trigger": "submit-message",
            "messages": [{"id": uuid.uuid4().hex, "role": "user", "parts": [{"type": "text", "text": text}]}]}
    started = time.monotonic()
    first = None
    async with client.stream("POST", "/chat", json=body) as response:
        async for line in response.aiter_lines():
            if first is None and line.startswith('data: {"type":"text-delta"'):
                first = time.monotonic() - started
    assert first is not None, "no text delta"
    return first


async def subscriber(client: httpx.AsyncClient, session_id: str, from_seq: int, ready: asyncio.Event,
                     connected: list[int], finished: list[float]) -> None:
    async with client.stream("GET", "/sse", params={"session_id": session_id, "follow": "true"},
                             headers={"Last-Event-ID": str(from_seq - 1)}) as response:
        connected.append(1)
        if len(connected) == connected[0] + 1:
            ready.set()
        async for line in response.aiter_lines():
            if line == "event: finish":
                finished.append(time.monotonic())
                return


async def measure(base: str, pid: int, url: str, subscribers: int, samples: int) -> dict[str, Any]:
    limits = httpx.Limits(max_connections=subscribers + 50, max_keepalive_connections=subscribers + 50)
    async with httpx.AsyncClient(base_url=base, timeout=120, limits=limits) as client:
        session = f"bench-{uuid.uuid4().hex[:8]}"
        await first_chat(client, session)
        seq = (await client.get("/status", params={"session_id": session})).json()["event_seq"]
        before = process_figures(pid, url)
        ready, connected, finished = asyncio.Event(), [subscribers], []
        tasks = [asyncio.create_task(subscriber(client, session, seq + 1, ready, connected, finished)) for _ in range(subscribers)]
        await asyncio.wait_for(ready.wait(), 120)
        await asyncio.sleep(2)
        during = process_figures(pid, url)
        await first_chat(client, session, "Just answer: again")
        committed = time.monotonic()
        await asyncio.wait_for(asyncio.gather(*tasks), 120)
        fan_out = max(finished) - committed
        ttft = [await first_chat(client, f"ttft-{uuid.uuid4().hex[:8]}") for _ in range(samples)]
    return {"before": before, "during": during, "fan_out_s": fan_out, "ttft": ttft}


def report(figures: dict[str, Any], subscribers: int) -> None:
    before, during = figures["before"], figures["during"]
    ttft = sorted(figures["ttft"])
    p99 = ttft[min(len(ttft) - 1, int(len(ttft) * 0.99))]
    print(f"chat and SSE on one server process ({subscribers} SSE subscribers of one session)")
    print(f"  threads           {before['threads']:6.0f} idle  {during['threads']:6.0f} with {subscribers} subscribers")
    print(f"  db connections    {before['connections']:6.0f} idle  {during['connections']:6.0f} with {subscribers} subscribers")
    print(f"  RSS               {before['rss_mib']:6.1f} MiB  {during['rss_mib']:6.1f} MiB "
          f"({(during['rss_mib'] - before['rss_mib']) * 1024 / subscribers:.1f} KiB a subscriber)")
    print(f"  a run's finish reached all {subscribers} after the POST /chat stream ended: {figures['fan_out_s'] * 1000:.0f} ms")
    print(f"  POST /chat -> first text-delta: p50 {statistics.median(ttft) * 1000:6.1f} ms  p99 {p99 * 1000:6.1f} ms"
          f"  ({len(ttft)} chats)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", default=None, help="a server URL (default: the embedded Postgres)")
    parser.add_argument("--subscribers", type=int, default=1000)
    parser.add_argument("--samples", type=int, default=20)
    args = parser.parse_args()
    args.database_url = resolve_database_url(args.database_url)
    name = f"helix_bench_chat_{uuid.uuid4().hex[:8]}"
    admin = libpq_url(render_url(args.database_url, database="postgres"))
    url = render_url(args.database_url, database=name)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    port = free_port()
    env = {**os.environ, "HELIX_SERVER_APP_URL": url, "PYTHONPATH": str(APPS)}
    server = subprocess.Popen(
        [str(HELIX), "serve", "--app", "chat_app:executor", "--allow-unauthenticated", "--port", str(port)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                if httpx.get(f"{base}/sessions", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        report(asyncio.run(measure(base, server.pid, url, args.subscribers, args.samples)), args.subscribers)
    finally:
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=60)
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


if __name__ == "__main__":
    main()
