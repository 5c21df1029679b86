"""Real ``helix-dbos worker`` processes for the worker tests, on ``tests/scaleout/scale_app.py``.

:class:`Proc` runs a CLI command in a subprocess and collects its stdout lines as they
come; :func:`start_worker` starts a worker (with a generated executor id unless given
one); :func:`scale_database` makes a migrated database with the ``scaleout.intervals``
table the app's tools record their work in.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import psycopg
import pytest

from helix_dbos._database import libpq_url
from helix_dbos._store.migrations import migrate

APP_DIR = Path(__file__).resolve().parent.parent / "scaleout"
CLI = "from helix_dbos._cli import main; main()"
WORK_SECONDS = 0.4

INTERVALS_SQL = """
CREATE SCHEMA scaleout;
CREATE TABLE scaleout.intervals (
    id bigserial PRIMARY KEY, session_id text NOT NULL, pid int NOT NULL,
    started double precision NOT NULL, ended double precision
);
"""


class Proc:
    """A CLI subprocess whose stdout lines are collected as they come."""

    def __init__(self, url: str, *args: str, work_seconds: float = WORK_SECONDS, env: dict[str, str] | None = None,
                 argv: list[str] | None = None) -> None:
        """``helix-dbos ARGS`` (or ``argv``) in ``tests/scaleout``, on database ``url``."""
        full_env = {**os.environ, "HELIX_SCALEOUT_URL": url, "HELIX_SCALEOUT_WORK_SECONDS": str(work_seconds),
                    "PYTHONFAULTHANDLER": "1", **(env or {})}
        self.popen = subprocess.Popen(
            argv or [sys.executable, "-c", CLI, *args], cwd=APP_DIR, env=full_env, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        self.lines: list[str] = []
        self.errors: list[str] = []
        self._readers = [
            threading.Thread(target=self._read, args=(stream, into), daemon=True)
            for stream, into in ((self.popen.stdout, self.lines), (self.popen.stderr, self.errors))
        ]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _read(stream: IO[str], into: list[str]) -> None:
        for line in stream:
            into.append(line.rstrip("\n"))

    @property
    def pid(self) -> int:
        return self.popen.pid

    def wait_for(self, prefix: str, timeout: float = 30) -> str:
        """The first stdout line that starts with ``prefix`` (fails the test after ``timeout``)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if line.startswith(prefix):
                    return line
            if self.popen.poll() is not None:
                break
            time.sleep(0.05)
        pytest.fail(f"no {prefix!r} line from {self.popen.args[3:]}: {self.lines}\n" + "\n".join(self.errors[-30:]))

    def listening(self) -> str:
        """Wait until the worker listens; its executor id."""
        return self.wait_for("worker ").split()[1]

    def kill(self) -> None:
        self.popen.kill()
        self.popen.wait()

    def exit_code(self, timeout: float) -> int:
        """Its exit status once it exits (with every line it printed read); a process still
        running after ``timeout`` seconds is sent SIGABRT (its faulthandler prints every
        thread's stack) and fails the test with what it printed."""
        try:
            code = self.popen.wait(timeout)
            for reader in self._readers:
                reader.join(5)
            return code
        except subprocess.TimeoutExpired:
            self.popen.send_signal(signal.SIGABRT)
            try:
                self.popen.wait(10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
            for reader in self._readers:
                reader.join(5)
            pytest.fail(f"{self.popen.args[3:]} did not exit in {timeout:g}s:\n" + "\n".join(self.lines[-20:])
                        + "\n" + "\n".join(self.errors[-150:]))

    def stop(self, timeout: float = 40) -> int:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            return self.popen.wait()


def start_worker(
    url: str, *extra: str, executor_id: str | None = None, concurrency: int = 3, global_limit: int | None = None,
    work_seconds: float = WORK_SECONDS, env: dict[str, str] | None = None, command: str = "worker",
) -> Proc:
    """``helix-dbos worker`` on the scale app's queue (``agents``)."""
    args = [command, "--app", "scale_app:executor", "--concurrency", str(concurrency), "--polling-interval", "0.05"]
    if global_limit is not None:
        args += ["--global-concurrency", str(global_limit)]
    if executor_id is not None:
        args += ["--executor-id", executor_id]
    return Proc(url, *args, *extra, work_seconds=work_seconds, env=env)


def scale_database(make_database: Callable[[], str]) -> str:
    """A new migrated database with the ``scaleout.intervals`` table."""
    url = make_database()
    migrate(url)
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute(INTERVALS_SQL)
    return url


def until(url: str, query: str, args: tuple[Any, ...], want: Callable[[Any], bool], what: str, timeout: float = 30) -> Any:
    """Poll ``query`` (its first value) until ``want`` holds; fail the test after ``timeout``."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        while True:
            value = conn.execute(query, args).fetchone()[0]
            if want(value):
                return value
            assert time.monotonic() < deadline, f"{what}: still {value!r} after {timeout}s"
            time.sleep(0.05)
