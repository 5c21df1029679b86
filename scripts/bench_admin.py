"""Benchmark: operator reads per second with an ``AdminClient`` (one pool, one DBOS client)
against the one-shot ``helix_dbos.admin`` functions (each opens its connections, checks
the schema and closes them again).

One read is ``list_sessions(limit=20)`` then ``list_pending()``, what an inbox page or a
polling operator tool makes. The async client is measured the same way.

    python scripts/bench_admin.py [--database-url URL] [--seconds 5]

The URL defaults to ``$HELIX_DATABASE_URL``; the database is migrated first (helix's
tables only; no session is written, so the figures measure connections, not data).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from collections.abc import Awaitable, Callable

from helix_dbos import admin
from helix_dbos._store.migrations import migrate
from helix_dbos.admin import AdminClient, AsyncAdminClient


def per_second(read: Callable[[], object], seconds: float) -> float:
    """How many times ``read()`` ran per second over about ``seconds``."""
    read()  # warm: imports, the first connection
    count, started = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - started) < seconds:
        read()
        count += 1
    return count / elapsed


async def per_second_async(read: Callable[[], Awaitable[object]], seconds: float) -> float:
    """:func:`per_second` for a coroutine function."""
    await read()
    count, started = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - started) < seconds:
        await read()
        count += 1
    return count / elapsed


def run(url: str, seconds: float = 5.0) -> dict[str, float]:
    """The figures: reads per second with each form."""
    migrate(url)

    def one_shot() -> None:
        admin.list_sessions(url, limit=20)
        admin.list_pending(url)

    with AdminClient(url) as ops:
        def held() -> None:
            ops.list_sessions(limit=20)
            ops.list_pending()

        figures = {"one-shot functions": per_second(one_shot, seconds), "AdminClient": per_second(held, seconds)}

    async def measure_async() -> float:
        async with AsyncAdminClient(url) as ops:
            async def read() -> None:
                await ops.list_sessions(limit=20)
                await ops.list_pending()

            return await per_second_async(read, seconds)

    figures["AsyncAdminClient"] = asyncio.run(measure_async())
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=os.environ.get("HELIX_DATABASE_URL"))
    parser.add_argument("--seconds", type=float, default=5.0)
    options = parser.parse_args()
    if not options.database_url:
        parser.error("give --database-url or set HELIX_DATABASE_URL")
    figures = run(options.database_url, options.seconds)
    base = figures["one-shot functions"]
    print("operator reads (list_sessions + list_pending) per second")
    for name, rate in figures.items():
        print(f"  {name:<20} {rate:8.1f}/s  ({rate / base:.1f}x)")


if __name__ == "__main__":
    main()
