"""Connection faults on the test's own database: backends killed every 50 ms while 20
sessions run. No run fails, every run completes once, nothing is written twice."""

from __future__ import annotations

import threading
import time
from typing import Callable

import psycopg

from helix_dbos._database import libpq_url

from storm import assert_all_completed_once, start_storm_app  # type: ignore[import-not-found]


def kill_backends(url: str, stop: threading.Event, every: float, until: float) -> int:
    """Terminate every other backend of the database at ``url`` each ``every`` seconds."""
    killed = 0
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        while not stop.is_set() and time.monotonic() < until:
            killed += conn.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchone()[0]
            time.sleep(every)
    return killed


def test_a_storm_of_killed_backends_fails_no_run(make_database: Callable[[], str]) -> None:
    url = make_database()
    app = start_storm_app(url)
    stop = threading.Event()
    killed: list[int] = []
    storm = threading.Thread(target=lambda: killed.append(kill_backends(url, stop, 0.05, time.monotonic() + 4)))
    storm.start()
    try:
        assert_all_completed_once(url, app)
    finally:
        stop.set()
        storm.join()
    assert killed and killed[0] > 0, "the storm killed nothing"
