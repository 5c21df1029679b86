"""Servers a test started, seen from the test: wait for one to serve a URL, and start a run
on a helix agent server::

    proc = subprocess.Popen([...], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_until_served(f"{base}/sessions", proc, timeout=60)
    start_run(base, "assistant", "hello", session_id="s1")
"""

from __future__ import annotations

import subprocess
import time

import httpx
import pytest


def wait_until_served(
    url: str, proc: subprocess.Popen[str], timeout: float, poll: float = 0.2, headers: dict[str, str] | None = None
) -> None:
    """Return once ``GET url`` (with ``headers``) answers 200. The test fails with the
    process's output when it exits first, and says it is still running when ``timeout``
    seconds pass (its output cannot be read then without waiting for it to end)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(url, headers=headers, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"the server exited ({proc.returncode}) before serving {url}:\n{(out or '')[-3000:]}{(err or '')[-3000:]}")
        if time.monotonic() >= deadline:
            pytest.fail(f"the server did not serve {url} within {timeout:.0f}s (it is still running)")
        time.sleep(poll)


def start_run(base: str, agent: str, text: str, session_id: str) -> None:
    """``POST {base}/start``: a run of ``agent`` on ``text`` in session ``session_id``; the
    test fails unless the server takes it (202)."""
    answer = httpx.post(f"{base}/start", json={"agent": agent, "input": text, "session_id": session_id}, timeout=30)
    assert answer.status_code == 202, (agent, text, answer.text)
