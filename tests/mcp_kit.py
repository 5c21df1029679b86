"""The test MCP server (``tests/mcp_server.py``) as a test sees it::

    server = MCPTestServer.start(tmp_path)      # streamable HTTP on 127.0.0.1, any free port
    server.url                                  # 'http://127.0.0.1:<port>/mcp'
    server.calls()                              # what reached it: [{"tool", "args", "authorization", "pid"}]
    server.kill(); server.restart()             # SIGKILL it; start it again on the same port
    server.stop()

``stdio_toolset_options(tmp_path)`` gives the ``command``/``args`` of a stdio server
logging to the same kind of file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

SERVER = Path(__file__).with_name("mcp_server.py")


@dataclass
class MCPTestServer:
    log: Path
    port: int
    proc: subprocess.Popen[str]

    @classmethod
    def start(cls, directory: Path, port: int = 0) -> MCPTestServer:
        log = directory / "mcp_calls.jsonl"
        log.touch()
        proc, port = _spawn(log, port)
        return cls(log, port, proc)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def calls(self, tool: str | None = None) -> list[dict[str, Any]]:
        lines = [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]
        return [line for line in lines if tool is None or line["tool"] == tool]

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)

    def restart(self, extra_tool: bool = False) -> None:
        """Start the server again on the same port (a new process: its state is gone),
        with one more tool (``extra``) when ``extra_tool``."""
        deadline = time.monotonic() + 10
        while True:
            try:
                self.proc, _ = _spawn(self.log, self.port, extra_tool)
                return
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.kill()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def _spawn(log: Path, port: int, extra_tool: bool = False) -> tuple[subprocess.Popen[str], int]:
    env = {**os.environ, **({"MCP_TEST_EXTRA_TOOL": "1"} if extra_tool else {})}
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "http", str(log), str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("PORT "):
        proc.wait(timeout=10)
        raise RuntimeError(f"the MCP test server did not start (exit {proc.returncode})")
    return proc, int(line.split()[1])


def stdio_options(directory: Path) -> dict[str, Any]:
    """``MCPToolset`` options for the test server over stdio, logging to ``mcp_calls.jsonl``."""
    log = directory / "mcp_calls.jsonl"
    log.touch()
    return {"command": sys.executable, "args": [str(SERVER), "stdio", str(log)]}


@pytest.fixture
def mcp_server(tmp_path: Path):  # type: ignore[no-untyped-def]
    server = MCPTestServer.start(tmp_path)
    yield server
    server.stop()
