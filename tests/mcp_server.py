"""A real MCP server for the tests (the ``mcp`` SDK's MCPServer), run as a process::

    python tests/mcp_server.py http CALL_LOG [PORT]   # streamable HTTP on 127.0.0.1 (port 0: any);
                                                      # prints "PORT <n>" once it listens
    python tests/mcp_server.py stdio CALL_LOG         # over stdin/stdout

Each tool call appends one JSON line to CALL_LOG: the tool, its arguments, the
``Authorization`` header the call came with (None over stdio) and the server's pid, so a
test sees what reached the server, how often, and as whom. ``begin`` lines are written
before ``slow`` sleeps, so a test can tell a call is in flight.

Tools: ``add`` (structured result), ``whoami``, ``fail`` (an isError result), ``picture``
(text, an image and a resource link), ``open_counter`` / ``increment`` (state kept in the
server across calls, named by an explicit handle), ``slow`` (sleeps); and ``extra`` when
``MCP_TEST_EXTRA_TOOL`` is set (a server whose tool list changed).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import uuid
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ImageContent, ResourceLink, TextContent

server = MCPServer("test-tools")
CALL_LOG = sys.argv[2]
counters: dict[str, int] = {}


def log(tool: str, ctx: Context | None, **args: Any) -> None:
    headers = (ctx.headers if ctx is not None else None) or {}
    line = {"tool": tool, "args": args, "authorization": headers.get("authorization"), "pid": os.getpid()}
    with open(CALL_LOG, "a") as file:
        file.write(json.dumps(line) + "\n")


@server.tool()
def add(a: int, b: int, ctx: Context) -> int:
    """Add two integers."""
    log("add", ctx, a=a, b=b)
    return a + b


@server.tool()
def whoami(ctx: Context) -> str:
    """Say whether the call came with credentials (an Authorization header)."""
    log("whoami", ctx)
    return "authorized" if (ctx.headers or {}).get("authorization") else "anonymous"


@server.tool()
def fail(why: str, ctx: Context) -> str:
    """Always fails."""
    log("fail", ctx, why=why)
    raise ToolError(f"cannot do it: {why}")


@server.tool()
def picture(ctx: Context) -> list[TextContent | ImageContent | ResourceLink]:
    """A picture, with a caption and a link."""
    log("picture", ctx)
    return [
        TextContent(type="text", text="a red dot"),
        ImageContent(type="image", data="aGVsbG8=", mime_type="image/png"),
        ResourceLink(type="resource_link", uri="file:///dots/red.png", name="red.png"),
    ]


@server.tool()
def open_counter(ctx: Context) -> dict[str, str]:
    """Open a counter; returns its handle."""
    handle = uuid.uuid4().hex[:8]
    counters[handle] = 0
    log("open_counter", ctx, handle=handle)
    return {"handle": handle}


@server.tool()
def increment(handle: str, ctx: Context) -> int:
    """Add one to the counter named by handle; returns its value."""
    log("increment", ctx, handle=handle)
    counters[handle] += 1
    return counters[handle]


@server.tool()
async def slow(label: str, seconds: float, ctx: Context) -> str:
    """Sleep, then return the label."""
    log("begin", ctx, label=label)
    await anyio.sleep(seconds)
    log("slow", ctx, label=label)
    return label


if os.environ.get("MCP_TEST_EXTRA_TOOL"):

    @server.tool()
    def extra(ctx: Context) -> str:
        """A tool only a restarted server has."""
        return "extra"


def serve_http(port: int) -> None:
    import uvicorn

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen()
    print("PORT", sock.getsockname()[1], flush=True)
    app = server.streamable_http_app()
    uvicorn_server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    anyio.run(lambda: uvicorn_server.serve(sockets=[sock]))


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run("stdio")
    else:
        serve_http(int(sys.argv[3]) if len(sys.argv) > 3 else 0)
