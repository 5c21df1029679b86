"""MCP servers as toolsets: an agent uses any MCP server's tools, each call a
checkpointed tool step (needs the ``mcp`` extra: ``pip install 'helix-dbos[mcp]'``)::

    from helix_dbos import define_agent
    from helix_dbos.mcp import MCPToolset

    tickets = MCPToolset("tickets", url="http://127.0.0.1:8931/mcp",
                         headers=lambda run: {"Authorization": f"Bearer {token_of(run.owner)}"})
    agent = define_agent("clerk", "Help with tickets.", toolsets=[tickets])

Its modules::

    toolset.py      MCPToolset: listing, the run's tools, the run's connection, credentials
    connection.py   one connection per run and process, reopened after a failure (Backoff)
    tool.py         MCPTool: a listed tool with the server's JSON Schema, validated arguments
    results.py      a call's answer as portable JSON; isError as MCPToolError
"""

from __future__ import annotations

try:
    import mcp as _sdk  # noqa: F401  (the official MCP SDK: the extra)
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise ImportError("helix_dbos.mcp needs the MCP SDK: pip install 'helix-dbos[mcp]'") from exc

from helix_dbos.mcp.connection import Backoff, MCPServerError
from helix_dbos.mcp.results import MCPToolError
from helix_dbos.mcp.tool import MCPArguments, MCPTool
from helix_dbos.mcp.toolset import MCPToolset
from helix_dbos.toolsets import ToolsetRun

__all__ = ["Backoff", "MCPArguments", "MCPServerError", "MCPTool", "MCPToolError", "MCPToolset", "ToolsetRun"]
