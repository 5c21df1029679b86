"""Toolsets: tools an agent gets, for each run, from elsewhere (an MCP server)::

    from helix_dbos.mcp import MCPToolset

    files = MCPToolset("files", url="http://127.0.0.1:8931/mcp")
    agent = define_agent("clerk", "Answer from the files.", toolsets=[files])

A toolset lists its tools once per run; the runtime records the listing in a
checkpointed step (``tools:<toolset name>``), so a replayed or adopted run offers the
model exactly the tools it offered before, and builds the run's :class:`~helix_dbos.tools.Tool`
objects from that record with :meth:`Toolset.tools`. Each call of such a tool is then a
tool step like any other. :meth:`Toolset.release` lets go of what the run held in this
process (a connection) when the run's workflow ends here.

This module does no I/O; :class:`Toolset` is what the runtime needs of a toolset.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from helix_dbos.tools import Tool


@dataclass(frozen=True)
class ToolsetRun:
    """The run a toolset serves: whose it is and where it is.

    ``owner`` is the session's owner (``SessionRecord.owner``; None for a session without
    one): the principal a toolset calls its server as (``MCPToolset(headers=...)``).

    Attributes:
        session_id: The run's session.
        run: The run's number within the session.
        agent_name: The running agent's name.
        owner: The session's owner, or None.
    """

    session_id: str
    run: int
    agent_name: str
    owner: str | None = None


@runtime_checkable
class Toolset(Protocol):
    """What the runtime needs of a toolset (``MCPToolset`` is one)."""

    @property
    def name(self) -> str:
        """Names the toolset's listing step (``tools:<name>``) and its calls' server."""
        ...

    async def list_tools(self, run: ToolsetRun) -> list[dict[str, Any]]:
        """The tools to offer in ``run``, as portable JSON (the listing step's checkpoint).
        Must hold no secret: it is stored as it is.

        Args:
            run: The run.

        Returns:
            The listing.
        """
        ...

    def tools(self, listing: list[dict[str, Any]], run: ToolsetRun) -> list[Tool]:
        """The run's tools, built from a listing :meth:`list_tools` returned (maybe in
        another process, before a crash).

        Args:
            listing: What :meth:`list_tools` returned.
            run: The run.

        Returns:
            The tools.
        """
        ...

    async def release(self, run: ToolsetRun) -> None:
        """Let go of what ``run`` holds in this process; never raises.

        Args:
            run: The run.
        """
        ...
