"""The embedded Postgres's server process, seen from a test: is it still running, and stop
it after a failure, so a test that checks the server stops with its last user leaves
nothing behind when it fails::

    assert not server_running(pgdata), "the embedded server outlived the demo"

``process_alive(pid)`` is the check underneath (the test databases of a run whose
process is gone are dropped with it, ``tests/conftest.py``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path


def _postmaster_pid(pgdata: Path) -> int | None:
    """The pid in ``pgdata``'s ``postmaster.pid``, or None without a readable one."""
    with contextlib.suppress(FileNotFoundError, ValueError, IndexError):
        return int((pgdata / "postmaster.pid").read_text().split()[0])
    return None


def server_running(pgdata: Path, grace: float = 10.0) -> bool:
    """Whether the postmaster of ``pgdata`` is still alive ``grace`` seconds from now at
    the latest: a server that is exiting gets that long to be gone (a killed one may wait
    to be reaped), and a stale pid file left by a server that was killed does not count."""
    deadline = time.monotonic() + grace
    while process_alive(_postmaster_pid(pgdata)):
        if time.monotonic() >= deadline:
            return True
        time.sleep(0.1)
    return False


def process_alive(pid: int | None) -> bool:
    """Whether process ``pid`` runs (a zombie waiting to be reaped does not)."""
    if pid is None:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def stop_postmaster(pgdata: Path) -> None:
    """Stop a server still running in ``pgdata`` (a fast shutdown; only after a failure),
    waiting up to 30 s for its pid file to go."""
    pid = _postmaster_pid(pgdata)
    if pid is None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGINT)
    deadline = time.monotonic() + 30
    while (pgdata / "postmaster.pid").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
