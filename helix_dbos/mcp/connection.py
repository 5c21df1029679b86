"""One connection to an MCP server, opened on first use and reopened after a failure::

    connection = MCPConnection("files", open_client, Backoff())
    listing = await connection.request(lambda client: client.list_tools())
    await connection.close()

``open_client()`` returns what enters an ``mcp.Client`` (an async context manager). The client lives in a task
of its own (the SDK's transports must be entered and left in one task, and a transport
that fails cancels the task that entered it); each request runs in that task's group,
and its caller waits for the answer. A request whose connection fails (the server went
away, restarted, or the network broke) raises :class:`ConnectionLost` inside;
:meth:`MCPConnection.request` then reconnects and sends it again, waiting ``backoff``
between attempts, up to ``backoff.attempts`` times. A request the server answered, even
with an error, is never sent again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TypeVar

import anyio
import httpx2
from anyio.abc import TaskGroup
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED

logger = logging.getLogger("helix_dbos")

T = TypeVar("T")

Request = Callable[[Client], Awaitable[T]]
"""A request to send on the connection: ``lambda client: client.call_tool(name, args)``."""


class MCPServerError(Exception):
    """An MCP server could not be reached, or its connection failed, on every attempt."""


class ConnectionLost(Exception):
    """The connection failed while a request was on it (the request may have reached the server)."""


@dataclass(frozen=True)
class Backoff:
    """How often, and how patiently, a request is tried again on a new connection: up to
    ``attempts`` tries, waiting ``first`` seconds after the first failure, then twice as
    long each time, at most ``most`` seconds.

    Attributes:
        attempts: Tries at most, the first included.
        first: Seconds after the first failure.
        most: Seconds between two tries at most.
    """

    attempts: int = 5
    first: float = 0.2
    most: float = 5.0

    def delays(self) -> list[float]:
        """The wait before each try after the first.

        Returns:
            Seconds, one per retry.
        """
        return [min(self.most, self.first * 2**n) for n in range(self.attempts - 1)]


def is_transport_error(exc: BaseException) -> bool:
    """Whether ``exc`` says the connection failed, not the server's answer: a network or
    HTTP error, a closed stream, or the SDK's connection-closed error."""
    if isinstance(exc, MCPError):
        return exc.code == CONNECTION_CLOSED
    inner = getattr(exc, "exceptions", None)  # an exception group (BaseExceptionGroup from Python 3.11)
    if isinstance(inner, tuple) and inner:
        return any(is_transport_error(each) for each in inner)
    return isinstance(exc, (httpx2.HTTPError, OSError, anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, ConnectionLost))


class MCPConnection:
    """A connection to one server, for one run in this process (see the module)."""

    def __init__(self, server: str, open_client: Callable[[], AbstractAsyncContextManager[Client]], backoff: Backoff) -> None:
        self.server = server
        self.loop = asyncio.get_running_loop()
        """The event loop the connection serves (made in a coroutine of that loop)."""
        self._open_client = open_client
        self._backoff = backoff
        self._group: TaskGroup | None = None
        self._client: Client | None = None
        self._owner: asyncio.Task[None] | None = None
        self._closing = asyncio.Event()
        self._opening = asyncio.Lock()
        self.opened = 0
        """How many times this connection was opened (1, plus one per reconnect)."""

    async def request(self, send: Request[T]) -> T:
        """``send(client)``'s answer, reconnecting after a failed connection (see the module).
        Raises :class:`MCPServerError` when every attempt failed, and whatever ``send``
        raised for an answer of the server."""
        failures: list[str] = []
        for delay in [0.0, *self._backoff.delays()]:
            if delay:
                await asyncio.sleep(delay)
            try:
                return await self._send(await self._connected(), send)
            except Exception as exc:
                if not is_transport_error(exc):
                    raise
                failures.append(_describe(exc))
                logger.info("MCP server %r: connection failed (%s); reconnecting", self.server, failures[-1])
                await self._drop()
        raise MCPServerError(
            f"MCP server {self.server!r} could not be reached after {len(failures)} attempts: {failures[-1]}"
        )

    async def close(self) -> None:
        """Close the connection (a request on it fails); never raises."""
        await self._drop()

    async def _connected(self) -> tuple[Client, TaskGroup]:
        async with self._opening:
            if self._owner is None or self._owner.done():
                await self._open()
            assert self._client is not None and self._group is not None
            return self._client, self._group

    async def _open(self) -> None:
        self._closing = asyncio.Event()
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._owner = asyncio.ensure_future(self._hold(ready))
        await asyncio.shield(ready)
        self.opened += 1

    async def _hold(self, ready: asyncio.Future[None]) -> None:
        """The connection's own task: enter the client, serve requests, leave it."""
        try:
            async with self._open_client() as client, anyio.create_task_group() as group:
                self._client, self._group = client, group
                ready.set_result(None)
                await self._closing.wait()
                group.cancel_scope.cancel()
        except BaseException as exc:  # the transport failed or the client could not connect
            if not ready.done():
                ready.set_exception(ConnectionLost(_describe(exc)) if is_transport_error(exc) else exc)
            if not isinstance(exc, Exception):
                raise
        finally:
            self._client, self._group = None, None

    async def _send(self, connected: tuple[Client, TaskGroup], send: Request[T]) -> T:
        client, group = connected
        answer: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        answer.add_done_callback(_retrieved)  # an answer nobody waits for any more is not an error
        scope = anyio.CancelScope()

        async def run() -> None:
            with scope:
                try:
                    answer.set_result(await send(client))
                    return
                except Exception as exc:
                    answer.set_exception(exc)
                    return
                finally:
                    if not answer.done():  # cancelled: the connection closed under it
                        answer.set_exception(ConnectionLost("the connection closed during the request"))

        group.start_soon(run)
        try:
            return await answer
        except asyncio.CancelledError:  # the caller gave up (a timeout, an abort): so does the request
            scope.cancel()
            raise

    async def _drop(self) -> None:
        owner = self._owner
        self._owner = None
        if owner is None or owner.done():
            return
        self._closing.set()
        try:
            await asyncio.wait_for(asyncio.shield(owner), timeout=5)
        except BaseException:  # a connection that will not close is left to its task
            logger.debug("MCP server %r: the connection did not close cleanly", self.server, exc_info=True)


def _retrieved(future: asyncio.Future[T]) -> None:
    if not future.cancelled():
        future.exception()


def _describe(exc: BaseException) -> str:
    """One line about a failure (the innermost of an exception group)."""
    while isinstance(getattr(exc, "exceptions", None), tuple) and getattr(exc, "exceptions"):
        exc = getattr(exc, "exceptions")[0]
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__

