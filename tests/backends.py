"""Connection faults for tests: terminate backends of the test's own database (never
another database's), and wait for DBOS to listen on it again::

    since = database_clock(url)
    assert terminate_other_backends(url) == 3                 # every other backend
    terminate_other_backends(url, "pid = %s", conn.info.backend_pid)   # one of them
    wait_for_dbos_listener(url, since)
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

import psycopg

from helix_dbos._database import libpq_url


def terminate_other_backends(url: str, where: str = "true", *params: Any) -> int:
    """Terminate the backends of the database at ``url`` that match ``where`` (this
    call's own excepted), waiting up to 5 s for each to be gone; how many there were."""
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        return conn.execute(
            "SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity"
            f" WHERE datname = current_database() AND pid <> pg_backend_pid() AND {where}",
            params,
        ).fetchone()[0]


def database_clock(url: str) -> datetime:
    """The database server's time now."""
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        return conn.execute("SELECT clock_timestamp()").fetchone()[0]


def wait_for_dbos_listener(url: str, since: datetime, timeout: float = 60.0) -> float:
    """Wait until DBOS listens on the database at ``url`` on a connection opened after
    ``since``; the seconds it took. DBOS misses what is sent while its LISTEN connection
    is down (a message then wakes its ``recv`` at DBOS's re-check, up to 60 s later), so
    a test that kills the session executor's connections waits for this before the next
    test runs."""
    started = time.monotonic()
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        while time.monotonic() - started < timeout:
            listening = conn.execute(
                "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database()"
                " AND application_name = 'dbos_transact' AND query = 'LISTEN dbos_streams_channel'"
                " AND state = 'idle' AND backend_start > %s)",
                (since,),
            ).fetchone()[0]
            if listening:
                return time.monotonic() - started
            time.sleep(0.05)
    raise TimeoutError(f"DBOS did not listen again within {timeout}s")
