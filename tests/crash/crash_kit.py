"""What the crash tests share: a database of one case, worker processes, their results.

    url = migrated_database(make_database, SLOW_COMMIT_TRIGGER)
    proc = start_worker(WORKER, url, "s-1", "exec-1", "start", marks)   # kill it at a mark ...
    result = finish(start_worker(WORKER, url, "s-1", "exec-1", "recover", marks))

One database per case: a DBOS worker that recovers a run may hand it to any worker on the
same database, and these workers exit as soon as their own run ends.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from helix_dbos import ToolContext, tool
from helix_dbos._database import libpq_url
from helix_dbos._store.migrations import migrate

SLOW_COMMIT_TRIGGER = """
CREATE FUNCTION helix.test_slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_sleep(0.4);
    RETURN NEW;
END $$;
CREATE TRIGGER test_slow_commit BEFORE INSERT ON helix.messages
    FOR EACH ROW WHEN (NEW.message->>'role' = 'assistant') EXECUTE FUNCTION helix.test_slow_commit();
"""
"""Makes each step's commit take 0.4 s, so a kill can land inside it."""


def migrated_database(make_database: Callable[[], str], setup_sql: str) -> str:
    """A new database with the helix schema and ``setup_sql`` (a test trigger) run in it."""
    url = make_database()
    migrate(url)
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute(setup_sql)
    return url


def start_worker(worker: Path, url: str, session_id: str, executor_id: str, mode: str, marks: Path) -> subprocess.Popen[str]:
    """``python WORKER URL SESSION EXECUTOR MODE``, dropping its marks in ``marks``."""
    return subprocess.Popen(
        [sys.executable, str(worker), url, session_id, executor_id, mode],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "HELIX_CRASH_DIR": str(marks), "PYTHONFAULTHANDLER": "1"},
    )


def kill_when(proc: subprocess.Popen[str], url: str, reached: Callable[[psycopg.Connection], bool]) -> bool:
    """SIGKILL the worker ``proc`` as soon as ``reached`` holds on the database at ``url``
    (polled every 2 ms, for up to 60 s); whether it did (False: the worker ended or time ran
    out first). Returns once the worker has exited."""
    killed = False
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            if reached(conn):
                proc.send_signal(signal.SIGKILL)
                killed = True
                break
            time.sleep(0.002)
    proc.communicate(timeout=30)
    return killed


def finish(proc: subprocess.Popen[str], timeout: float = 60) -> dict[str, Any]:
    """The JSON the worker printed last, once it exited 0 (else the test fails with its
    stderr; a worker that did not finish is sent SIGABRT first, so the faulthandler it runs
    with adds every thread's stack, and the failure shows what it printed too)."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        try:
            out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        pytest.fail(f"worker {proc.args[3:]} did not finish in {timeout}s:\nstdout: {out[-1000:]}\n{err[-8000:]}")
    assert proc.returncode == 0, f"worker failed ({proc.returncode}):\n{err[-3000:]}"
    return json.loads(out.strip().splitlines()[-1])


def ledger_tool(seconds: float) -> Any:
    """``slow(label)``: appends ``<session> <label>`` to ``<argv[5]>/ledger_<label>.txt``
    (so the test sees a tool began), then takes ``seconds``."""
    @tool
    def slow(label: str, ctx: ToolContext) -> dict:
        """Do slow work for a label."""
        with open(Path(sys.argv[5]) / f"ledger_{label}.txt", "a") as ledger:
            ledger.write(f"{ctx.session_id} {label}\n")
        time.sleep(seconds)
        return {"worked": label}

    return slow


def run_one_session(parent: Any, respond: Callable[..., Any], message: str = "go") -> None:
    """A crash worker's main: ``WORKER URL SESSION EXECUTOR start|recover ...``. ``start``
    runs ``parent`` on a new session with ``message``; ``recover`` only launches DBOS (same
    executor id), which recovers what a killed worker left PENDING. Prints the result as
    one JSON line."""
    from helix_dbos import MockLLMAdapter, launch_standalone, shutdown

    url, session_id, executor_id, mode = sys.argv[1:5]
    executor = launch_standalone(
        MockLLMAdapter(responder=respond), agents=[parent], database_url=url, executor_id=executor_id,
        notification_listener_polling_interval_sec=0.01,
    )
    handle = executor.execute(parent, message, session_id=session_id) if mode == "start" else executor.handle(session_id)
    print(json.dumps(handle.result(timeout=120).model_dump(mode="json")), flush=True)
    shutdown()
