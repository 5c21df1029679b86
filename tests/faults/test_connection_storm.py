"""Connection faults on the test's own database: backends killed every 50 ms while 20
sessions run. No run fails, every run completes once, nothing is written twice."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

import psycopg

from helix_dbos.database import libpq_url
from helix_dbos.store.migrations import migrate

APP = Path(__file__).resolve().parent.parent / "apps" / "storm_app.py"
SESSIONS = 20


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
    migrate(url)
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute("CREATE SCHEMA storm; CREATE TABLE storm.ledger (session_id text, call_id text)")
    app = subprocess.Popen([sys.executable, str(APP), url, str(SESSIONS)], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    assert app.stdout is not None and app.stdout.readline() == "started\n", app.stderr.read() if app.stderr else ""
    stop = threading.Event()
    killed: list[int] = []
    storm = threading.Thread(target=lambda: killed.append(kill_backends(url, stop, 0.05, time.monotonic() + 4)))
    storm.start()
    try:
        out, err = app.communicate(timeout=300)
    finally:
        stop.set()
        storm.join()
    assert killed and killed[0] > 0, "the storm killed nothing"
    assert app.returncode == 0, err[-3000:]
    statuses = json.loads(out.strip().splitlines()[-1])
    assert statuses == {f"storm-{i}": "completed" for i in range(SESSIONS)}
    with psycopg.connect(libpq_url(url)) as conn:
        runs = conn.execute("SELECT count(*), count(*) FILTER (WHERE status = 'completed') FROM helix.runs").fetchone()
        messages = conn.execute("SELECT session_id, count(*) FROM helix.messages GROUP BY session_id").fetchall()
        steps = conn.execute("SELECT DISTINCT step_count FROM helix.sessions").fetchall()
    assert runs == (SESSIONS, SESSIONS)
    assert {n for _, n in messages} == {11}  # user, 3 x (assistant + 2 results), final answer
    assert steps == [(4,)]


