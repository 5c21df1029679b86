"""The trace backend of the tracing tests: one Arize Phoenix (``phoenix serve`` from
``.helix/phoenix-venv``, which scripts/test.sh installs) for the whole run; each test
reads back the traces of its own sessions."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from obs_kit import free_port
from serving import wait_until_served

PHOENIX = Path(__file__).resolve().parents[2] / ".helix" / "phoenix-venv" / "bin" / "phoenix"


@pytest.fixture(scope="session")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A Phoenix server of its own (SQLite in a temporary directory); its base URL."""
    if not PHOENIX.exists():
        pytest.fail(f"Arize Phoenix is not installed at {PHOENIX}: run ./scripts/test.sh (it installs it)")
    port, grpc = free_port(), free_port()
    env = {**os.environ, "PHOENIX_WORKING_DIR": str(tmp_path_factory.mktemp("phoenix")), "PHOENIX_PORT": str(port),
           "PHOENIX_GRPC_PORT": str(grpc), "PHOENIX_HOST": "127.0.0.1"}
    proc = subprocess.Popen([str(PHOENIX), "serve"], env=env, text=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    wait_until_served(f"{base}/healthz", proc, timeout=120, poll=0.5)
    try:
        yield base
    finally:
        proc.terminate()
        proc.wait(30)
