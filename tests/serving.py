"""Wait for a server process a test started to serve a URL::

    proc = subprocess.Popen([...], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_until_served(f"{base}/sessions", proc, timeout=60)
"""

from __future__ import annotations

import subprocess
import time

import httpx
import pytest


def wait_until_served(url: str, proc: subprocess.Popen[str], timeout: float, poll: float = 0.2) -> None:
    """Return once ``GET url`` answers 200. The test fails with the process's output when
    it exits first, and says it is still running when ``timeout`` seconds pass (its output
    cannot be read then without waiting for it to end)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"the server exited ({proc.returncode}) before serving {url}:\n{(out or '')[-3000:]}{(err or '')[-3000:]}")
        if time.monotonic() >= deadline:
            pytest.fail(f"the server did not serve {url} within {timeout:.0f}s (it is still running)")
        time.sleep(poll)
