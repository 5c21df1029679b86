"""An MCP server's tools as a helix toolset::

    from helix_dbos.mcp import MCPToolset

    tickets = MCPToolset(
        "tickets", url="https://tickets.internal/mcp",
        headers=lambda run: {"Authorization": f"Bearer {token_of(run.owner)}"},
        prefix="tickets", deny=["delete_ticket"], require_approval={"close_ticket": True},
    )
    files = MCPToolset("files", command="npx", args=["-y", "@modelcontextprotocol/server-filesystem", "/srv"])
    agent = define_agent("clerk", "Help with tickets.", toolsets=[tickets, files])

Each run lists the server's tools once, in a checkpointed step (``tools:<name>``, its
checkpoint the tools' names, descriptions and input schemas), and offers them to the
model under their own names (``<prefix>_<name>`` with a prefix). Each call is a tool
step like any other: its arguments validated against the tool's schema, its result
(:mod:`helix_dbos.mcp.results`) checkpointed once, an error result the model sees when
the tool answers ``isError`` or the server cannot be reached.

The connection is opened on the run's first request in this process and kept for the
run: ``url`` speaks streamable HTTP, ``command`` starts the server over stdio (one
process per run). A connection that fails is reopened and the request sent again
(:class:`~helix_dbos.mcp.connection.Backoff`); a call in flight when the connection
fails may so reach the server twice.

``headers`` (a mapping, or a function of the :class:`~helix_dbos.toolsets.ToolsetRun`,
sync or async) are sent with every HTTP request; the function runs each time a
connection opens, so each user's run calls the server as that user (``run.owner``).
They are never stored: not in a checkpoint, an event, the transcript or a span.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Union

import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_types import Implementation

from helix_dbos.errors import AgentDefinitionError
from helix_dbos.mcp.connection import Backoff, MCPConnection
from helix_dbos.mcp.results import result_json
from helix_dbos.mcp.tool import MCPArguments, MCPTool, helix_name, is_valid_schema
from helix_dbos.observability import points as observe
from helix_dbos.tools import TOOL_NAME_PATTERN, ApprovalPredicate, ToolContext, is_positive_seconds
from helix_dbos.toolsets import ToolsetRun

logger = logging.getLogger("helix_dbos")

Headers = Union[Mapping[str, str], Callable[[ToolsetRun], Union[Mapping[str, str], Awaitable[Mapping[str, str]]]]]
"""HTTP headers for a server: fixed, or a function of the run (sync or async)."""

Approval = Union[bool, ApprovalPredicate]

HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)
"""Connecting and sending may take 30 s; an answer (or a stream's next event) 300 s.
A call's own limit is the tool's ``timeout`` (else the agent's ``tool_timeout``)."""

_MAX_PAGES = 100
"""At most this many pages of ``tools/list`` are read."""


class MCPToolset:
    """An MCP server's tools, offered to an agent (see the module). Exactly one of
    ``url`` (streamable HTTP) and ``command`` (stdio) says where the server is.

    Args:
        name: Names the server in steps (``tools:<name>``), spans and metrics: 1 to 64
            letters, digits, ``_`` or ``-``.
        url: The server's streamable HTTP endpoint.
        command: The program of a stdio server.
        args: The stdio program's arguments.
        env: The stdio program's environment.
        cwd: The stdio program's working directory.
        headers: HTTP headers for every request: fixed, or a function of the run (sync
            or async), so each run calls the server as its session's owner.
        prefix: Offer each tool as ``<prefix>_<name>``.
        allow: The server's tool names to offer; None offers all.
        deny: The server's tool names never to offer.
        require_approval: For every tool, or a mapping from the server's tool names: a
            bool or a predicate ``(input, ctx) -> bool`` whose ``input.root`` is the
            arguments.
        timeout: Seconds a call may take; default the agent's ``tool_timeout``.
        backoff: How a failed connection is retried.

    Raises:
        AgentDefinitionError: A bad name, both or neither of ``url`` and ``command``,
            headers for a stdio server, a timeout that is not positive, or a backoff of
            no attempt.
    """

    def __init__(
        self,
        name: str,
        *,
        url: str | None = None,
        command: str | None = None,
        args: Collection[str] = (),
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        headers: Headers | None = None,
        prefix: str | None = None,
        allow: Collection[str] | None = None,
        deny: Collection[str] = (),
        require_approval: Approval | Mapping[str, Approval] = False,
        timeout: float | None = None,
        backoff: Backoff = Backoff(),
    ) -> None:
        if not isinstance(name, str) or not TOOL_NAME_PATTERN.fullmatch(name):
            raise AgentDefinitionError(f"MCPToolset {name!r}: name must be 1-64 characters of letters, digits, '_' or '-'")
        if (url is None) == (command is None):
            raise AgentDefinitionError(f"MCPToolset {name!r}: give either url (streamable HTTP) or command (stdio)")
        if headers is not None and url is None:
            raise AgentDefinitionError(f"MCPToolset {name!r}: headers need a url (a stdio server takes env)")
        if timeout is not None and not is_positive_seconds(timeout):
            raise AgentDefinitionError(f"MCPToolset {name!r}: timeout must be a positive number of seconds")
        if backoff.attempts < 1:
            raise AgentDefinitionError(f"MCPToolset {name!r}: backoff.attempts must be at least 1")
        self._name = name
        self.url = url
        self.stdio = None if command is None else StdioServerParameters(
            command=command, args=list(args), env=dict(env) if env is not None else None, cwd=cwd
        )
        self._headers = headers
        self.prefix = prefix
        self.allow = None if allow is None else frozenset(allow)
        self.deny = frozenset(deny)
        self.require_approval = require_approval
        self.timeout = timeout
        self.backoff = backoff
        self._connections: dict[tuple[str, int], MCPConnection] = {}

    @property
    def name(self) -> str:
        """The toolset's name."""
        return self._name

    def __repr__(self) -> str:
        return f"MCPToolset({self._name!r}, {'url=' + repr(self.url) if self.url else 'command=' + repr(self.stdio and self.stdio.command)})"

    # --- the Toolset protocol ---------------------------------------------------------

    async def list_tools(self, run: ToolsetRun) -> list[dict[str, Any]]:
        """The server's tools this toolset offers: ``{"name", "description", "inputSchema"}``
        each, by the server's names; a tool whose input schema is not a JSON Schema of an
        object is left out (logged).

        Args:
            run: The run the listing is for (its headers are the run's).

        Returns:
            The listing, portable JSON.

        Raises:
            MCPServerError: The server could not be reached on any attempt.
        """
        listed: list[dict[str, Any]] = []
        cursor: str | None = None
        connection = self.connection(run)
        for _ in range(_MAX_PAGES):
            page = await connection.request(lambda client: client.list_tools(cursor=cursor, cache_mode="refresh"))
            for tool in page.tools:
                if not self._offers(tool.name):
                    continue
                if not is_valid_schema(tool.input_schema):
                    logger.warning("MCP server %r: tool %r left out, its inputSchema is not an object schema", self.name, tool.name)
                    continue
                listed.append({"name": tool.name, "description": tool.description or "", "inputSchema": tool.input_schema})
            cursor = page.next_cursor
            if cursor is None:
                break
        return listed

    def tools(self, listing: list[dict[str, Any]], run: ToolsetRun) -> list[MCPTool]:
        """The run's tools, from a listing of :meth:`list_tools`.

        Args:
            listing: What :meth:`list_tools` returned.
            run: The run.

        Returns:
            The tools.
        """
        return [self._tool(entry, run) for entry in listing]

    async def release(self, run: ToolsetRun) -> None:
        """Close the run's connection in this process, if it has one; never raises.

        Args:
            run: The run.
        """
        connection = self._connections.pop((run.session_id, run.run), None)
        if connection is not None:
            await connection.close()

    # --- connections --------------------------------------------------------------------

    def connection(self, run: ToolsetRun) -> MCPConnection:
        """The run's connection in this process (opened on its first request).

        Args:
            run: The run.

        Returns:
            The connection.
        """
        key = (run.session_id, run.run)
        connection = self._connections.get(key)
        if connection is not None and connection.loop is asyncio.get_running_loop():
            return connection
        if connection is not None and not connection.loop.is_closed():  # the run moved to another event loop
            asyncio.run_coroutine_threadsafe(connection.close(), connection.loop)
        connection = MCPConnection(self.name, lambda: self._client(run), self.backoff)
        self._connections[key] = connection
        return connection

    @asynccontextmanager
    async def _client(self, run: ToolsetRun) -> AsyncIterator[Client]:
        info = Implementation(name="helix-dbos", version=_version())
        if self.stdio is not None:
            async with Client(self.stdio, client_info=info, cache=None) as client:
                yield client
            return
        assert self.url is not None
        headers = await self._headers_for(run)
        async with httpx2.AsyncClient(headers=headers, timeout=HTTP_TIMEOUT) as http:
            async with Client(streamable_http_client(self.url, http_client=http), client_info=info, cache=None) as client:
                yield client

    async def _headers_for(self, run: ToolsetRun) -> dict[str, str]:
        headers = self._headers
        if headers is None:
            return {}
        if callable(headers):
            given = headers(run)
            given = await given if inspect.isawaitable(given) else given
            return dict(given)
        return dict(headers)

    # --- tools ----------------------------------------------------------------------------

    def _offers(self, remote_name: str) -> bool:
        return (self.allow is None or remote_name in self.allow) and remote_name not in self.deny

    def _approval(self, remote_name: str) -> Approval:
        if isinstance(self.require_approval, Mapping):
            return self.require_approval.get(remote_name, False)
        return self.require_approval

    def _tool(self, entry: dict[str, Any], run: ToolsetRun) -> MCPTool:
        remote_name = entry["name"]

        async def execute(arguments: MCPArguments, ctx: ToolContext) -> dict[str, Any]:
            connection = self.connection(run)
            with observe.mcp_call(self.name):
                answer = await connection.request(lambda client: client.call_tool(remote_name, arguments.root))
                return result_json(answer)

        return MCPTool(
            name=helix_name(remote_name, self.prefix),
            description=entry.get("description") or "",
            input_schema=MCPArguments,
            execute=execute,
            require_approval=self._approval(remote_name),
            timeout=self.timeout,
            json_schema=entry["inputSchema"],
            server=self.name,
            remote_name=remote_name,
        )


def _version() -> str:
    from helix_dbos import __version__

    return __version__
