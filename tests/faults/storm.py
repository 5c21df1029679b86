"""The fault tests' workload: ``tests/apps/storm_app.py`` running 20 sessions against a
database, and the check that every run completed once with nothing written twice::

    app = start_storm_app(url)      # returns when all sessions have started
    ... inject faults ...
    assert_all_completed_once(url, app)
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import psycopg

from helix_dbos._database import libpq_url
from helix_dbos._store.migrations import migrate

APP = Path(__file__).resolve().parent.parent / "apps" / "storm_app.py"
SESSIONS = 20


def start_storm_app(url: str) -> subprocess.Popen[str]:
    """Migrate ``url``, create the tools' ledger, start the app; returns once its runs started."""
    migrate(url)
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute("CREATE SCHEMA storm; CREATE TABLE storm.ledger (session_id text, call_id text)")
    app = subprocess.Popen([sys.executable, str(APP), url, str(SESSIONS)], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    assert app.stdout is not None and app.stdout.readline() == "started\n", app.stderr.read() if app.stderr else ""
    return app


def assert_all_completed_once(url: str, app: subprocess.Popen[str]) -> None:
    """The app exits 0, every session completed, one run each, each message written once."""
    out, err = app.communicate(timeout=300)
    assert app.returncode == 0, err[-3000:]
    assert json.loads(out.strip().splitlines()[-1]) == {f"storm-{i}": "completed" for i in range(SESSIONS)}
    with psycopg.connect(libpq_url(url)) as conn:
        runs = conn.execute("SELECT count(*), count(*) FILTER (WHERE status = 'completed') FROM helix.runs").fetchone()
        messages = conn.execute(
            "SELECT s.id, count(*) FROM helix.messages m JOIN helix.sessions s ON s.num = m.session_num GROUP BY s.id"
        ).fetchall()
        steps = conn.execute("SELECT DISTINCT step_count FROM helix.sessions").fetchall()
        notes = conn.execute("SELECT count(DISTINCT (session_id, call_id)) FROM storm.ledger").fetchone()
    assert runs == (SESSIONS, SESSIONS)
    assert len(messages) == SESSIONS and {n for _, n in messages} == {11}  # user, 3 x (assistant + 2 results), answer
    assert steps == [(4,)]
    assert notes == (SESSIONS * 6,)  # every tool call ran (a retried one may note twice: at-least-once)
