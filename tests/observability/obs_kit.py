"""Processes of the observability tests: ``helix-dbos worker`` and ``serve`` on
``obs_app.py``, free ports, and polling helpers."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import httpx
import pytest

HERE = Path(__file__).resolve().parent
CLI = "from helix_dbos._cli import main; main()"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Proc:
    """``helix-dbos ARGS`` in this directory on database ``url``, its output collected."""

    def __init__(self, url: str, *args: str, env: dict[str, str] | None = None) -> None:
        self.popen = subprocess.Popen(
            [sys.executable, "-c", CLI, *args], cwd=HERE, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env={**os.environ, "HELIX_OBS_URL": url, "HELIX_LEASE_TTL": "3", **(env or {})},
        )
        self.lines: list[str] = []
        for stream in (self.popen.stdout, self.popen.stderr):
            threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, text: str, timeout: float = 60) -> None:
        until(lambda: any(text in line for line in self.lines) or self.popen.poll() is not None, f"{text!r}", timeout)
        if not any(text in line for line in self.lines):
            pytest.fail(f"no {text!r} from {self.popen.args[3:]}:\n" + "\n".join(self.lines[-40:]))

    def kill(self) -> None:
        self.popen.kill()
        self.popen.wait()

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()


def worker(url: str, *extra: str, env: dict[str, str] | None = None) -> Proc:
    proc = Proc(url, "worker", "--app", "obs_app:executor", "--queue", "agents", "--concurrency", "4",
                "--polling-interval", "0.05", *extra, env=env)
    proc.wait_for("listening on")
    return proc


def server(url: str, port: int, env: dict[str, str] | None = None) -> Proc:
    proc = Proc(url, "serve", "--app", "obs_app:executor", "--allow-unauthenticated", "--no-worker",
                "--queue", "agents", "--port", str(port), env=env)
    proc.wait_for("serving agents")
    return proc


def stop_all(*procs: Proc | None) -> None:
    """SIGTERM each process that was started, and wait for it."""
    for proc in procs:
        if proc is not None:
            proc.stop()


def crash_and_replace(killed: Proc, url: str, env: dict[str, str]) -> Proc:
    """SIGKILL ``killed`` (in the middle of a 30 s ``slow`` tool) and start another worker,
    whose ``slow`` takes 0.2 s; it (or another live process) adopts the killed one's runs."""
    killed.kill()
    return worker(url, env={**env, "HELIX_OBS_SLOW_SECONDS": "0.2"})


def slow_called(url: str, session_id: str) -> bool:
    """Whether the session, or a child whose events it relays, called the ``slow`` tool
    (False before the session exists)."""
    from helix_dbos import admin
    from helix_dbos.errors import SessionNotFoundError

    try:
        events = admin.stream(url, session_id, follow=False)
    except SessionNotFoundError:
        return False
    return any(e.type == "tool_call" and "slow" in str(e.data) for e in events)


def until(check: Callable[[], Any], what: str, timeout: float = 60, every: float = 0.2) -> Any:
    """Poll ``check`` until it returns something truthy; fail the test after ``timeout``.
    A check that returns a pair ``(ok, seen)`` reports ``seen`` when it fails."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value and not isinstance(value, tuple) or isinstance(value, tuple) and value[0]:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"still waiting for {what} after {timeout}s (last: {value!r})")
        time.sleep(every)


def spans_of(base: str, trace_id: str) -> list[dict[str, Any]]:
    """Every span Phoenix holds of trace ``trace_id``."""
    found: list[dict[str, Any]] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 1000, **({"cursor": cursor} if cursor else {})}
        body = httpx.get(f"{base}/v1/projects/default/spans", params=params, timeout=30).json()
        found += [s for s in body["data"] if s["context"]["trace_id"] == trace_id]
        cursor = body.get("next_cursor")
        if not cursor:
            return found


def spans_when(base: str, trace_id: str, ready: Callable[[list[dict[str, Any]]], bool], what: str) -> list[dict[str, Any]]:
    """The spans of trace ``trace_id`` once ``ready(spans)``; a failure lists them briefly."""
    seen: list[dict[str, Any]] = []

    def check() -> tuple[bool, list[tuple[Any, ...]]]:
        seen[:] = spans_of(base, trace_id)
        brief = [(s["name"], s["context"]["span_id"], s["parent_id"], s["attributes"].get("helix.session_id")) for s in seen]
        return ready(seen), brief

    until(check, what)
    return seen


def span_tree(spans: list[dict[str, Any]]) -> tuple[dict[str, dict[str, Any]], Callable[..., list[dict[str, Any]]]]:
    """Spans by id, and ``children(span, name=None)``: the spans whose parent is ``span``."""

    def children(span: dict[str, Any], name: str | None = None) -> list[dict[str, Any]]:
        return [s for s in spans if s["parent_id"] == span["context"]["span_id"] and (name is None or s["name"] == name)]

    return {s["context"]["span_id"]: s for s in spans}, children


def run_completed(url: str, session_id: str, run: int) -> bool:
    """Whether run ``run`` is the session's latest and completed (False before the session exists)."""
    from helix_dbos import admin
    from helix_dbos.errors import SessionNotFoundError

    try:
        current = admin.get_current_run(url, session_id)
    except SessionNotFoundError:
        return False
    return current is not None and current.run == run and current.status == "completed"
