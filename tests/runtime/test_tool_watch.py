"""The watcher of running tool calls (``_durable/tool_execution/watch.py``) waits before its first
read: a call that ends within ``POLL_SECONDS`` costs no read of the runs, and a call that
runs longer is still told, within about one interval, that its run no longer holds the
session."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from runtime_testkit import statements_run, wait_for

from helix_dbos._durable.tool_execution.watch import POLL_SECONDS, RunWatch
from helix_dbos._store.pools import Pool, create_pool
from helix_dbos.tools import AbortSignal


@contextmanager
def watched_pool(executor) -> Iterator[tuple[Pool, list[str]]]:
    """A pool of its own on the test's database, and the statements it runs."""
    pool = create_pool(executor.database_url)
    try:
        with statements_run(pool) as statements:
            yield pool, statements
    finally:
        pool.close()


def test_a_call_that_ends_within_the_poll_interval_costs_no_read(executor):
    with watched_pool(executor) as (pool, statements):
        watch = RunWatch(pool)
        for _ in range(3):
            with watch.watching("no-such-session", 1, AbortSignal()):
                time.sleep(POLL_SECONDS / 10)
        time.sleep(POLL_SECONDS * 2.5)
        assert [s for s in statements if "helix.sessions" in s] == []


def test_a_longer_call_is_told_that_its_run_no_longer_holds_the_session(executor):
    with watched_pool(executor) as (pool, statements):
        watch = RunWatch(pool)
        signal = AbortSignal()
        with watch.watching("no-such-session", 1, signal):
            wait_for(signal.is_set, timeout=POLL_SECONDS * 10, what="the abort signal")
        assert signal.reason == "abort"
        assert any("helix.sessions" in s for s in statements)
