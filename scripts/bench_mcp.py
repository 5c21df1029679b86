"""What an MCP tool call costs over a bare helix tool call, and the connections a run opens.

    python scripts/bench_mcp.py [--database-url URL] [--quick]

Two agents run the same script: K model turns, each calling ``add(a, b)`` once, then a
text answer; the model is scripted and answers at once. One agent's ``add`` is a helix
tool; the other's comes from an MCP server (the ``mcp`` SDK's MCPServer, streamable HTTP
on 127.0.0.1, in a process of its own, started here). It prints the microseconds per call
of each, their difference (the MCP call's own cost: the request to the server and its
answer, on the same machine), and how many connections each MCP run opened. Runs on a
database of its own (created on the server of --database-url, else the embedded
Postgres, and dropped at the end).
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from helix_dbos import MockLLMAdapter, define_agent, launch_standalone, shutdown, tool  # noqa: E402
from helix_dbos._database import libpq_url, render_url, resolve_database_url  # noqa: E402
from helix_dbos.mcp import MCPToolset  # noqa: E402
from helix_dbos.mcp.connection import MCPConnection  # noqa: E402
from helix_dbos.toolsets import ToolsetRun  # noqa: E402
from helix_dbos.types import AssistantMessage, Message, StepResult, TextStepResult, ToolCallsStepResult, ToolSpec, UserMessage  # noqa: E402


def serve(port_file: str) -> None:
    """The MCP server process: one tool, ``add``; writes its port to ``port_file``."""
    import anyio
    import uvicorn
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("bench")

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    sock = socket.create_server(("127.0.0.1", 0))
    Path(port_file).write_text(str(sock.getsockname()[1]))
    app = uvicorn.Server(uvicorn.Config(server.streamable_http_app(), log_level="warning"))
    anyio.run(lambda: app.serve(sockets=[sock]))


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class CountingToolset(MCPToolset):
    """An MCPToolset that remembers the connections its runs used."""

    def __init__(self, *args: Any, **options: Any) -> None:
        super().__init__(*args, **options)
        self.used: list[MCPConnection] = []

    def connection(self, run: ToolsetRun) -> MCPConnection:
        connection = super().connection(run)
        if connection not in self.used:
            self.used.append(connection)
        return connection


def respond(messages: list[Message], tools: list[ToolSpec]) -> StepResult:
    """K turns of one ``add`` call, then a text answer; K is in the user's message."""
    turns = int(str(next(m for m in messages if isinstance(m, UserMessage)).content).split("=")[1])
    turn = sum(isinstance(m, AssistantMessage) for m in messages) + 1
    if turn > turns:
        return TextStepResult(content="done")
    return ToolCallsStepResult(tool_calls=[{"id": f"a{turn}", "name": "add", "arguments": {"a": turn, "b": 1}}])


def run(executor: Any, agent: Any, turns: int) -> float:
    started = time.perf_counter()
    result = executor.execute(agent, f"turns={turns}", session_id=f"bench-mcp-{uuid.uuid4().hex[:8]}").result(
        timeout=600, poll_interval=0.005
    )
    assert result.status == "completed", result
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--quick", action="store_true", help="fewer runs (a smoke run)")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return
    server_url = resolve_database_url(args.database_url)
    name = f"helix_bench_mcp_{os.getpid()}"
    with psycopg.connect(libpq_url(server_url), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    port_file = Path(f"/tmp/{name}.port")
    server = subprocess.Popen([sys.executable, __file__, "--serve", str(port_file)])
    try:
        while not port_file.exists() or not port_file.read_text():
            time.sleep(0.05)
        toolset = CountingToolset("bench", url=f"http://127.0.0.1:{port_file.read_text()}/mcp")
        bare = define_agent("bench-bare", "Add.", tools=[add], max_steps=1000)
        remote = define_agent("bench-mcp", "Add.", toolsets=[toolset], max_steps=1000)
        executor = launch_standalone(MockLLMAdapter(respond), [bare, remote], database_url=render_url(server_url, database=name))
        report(executor, bare, remote, toolset, turns=20, repeats=2 if args.quick else 7)
        shutdown()
    finally:
        server.kill()
        port_file.unlink(missing_ok=True)
        with psycopg.connect(libpq_url(server_url), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def report(executor: Any, bare: Any, remote: Any, toolset: CountingToolset, turns: int, repeats: int) -> None:
    run(executor, bare, 2)
    run(executor, remote, 2)  # warm up
    toolset.used.clear()
    ours, theirs = [], []
    for _ in range(repeats):  # interleaved, so both see the same machine
        ours.append(run(executor, bare, turns))
        theirs.append(run(executor, remote, turns))
    bare_us = statistics.median(ours) / turns * 1e6
    mcp_us = statistics.median(theirs) / turns * 1e6
    opened = [connection.opened for connection in toolset.used]
    print(f"MCP tool call vs helix tool call (K={turns} turns of one call, {repeats} runs each, median)")
    print(f"  helix tool: {bare_us:.0f} us/call   MCP tool: {mcp_us:.0f} us/call   MCP's own cost: {mcp_us - bare_us:.0f} us/call")
    print(f"  connections opened per MCP run: {statistics.mean(opened):.1f} (runs: {len(opened)})")


if __name__ == "__main__":
    main()
