"""A run's toolsets, as workflow code: listed once per run, each listing a checkpointed
step, so a replayed, adopted or continued run offers the model the tools it offered
before::

    listed = await list_toolsets(agent, request)         # steps session_owner, tools:<name>
    run_agent = with_toolset_tools(agent, request, listed) # the agent with the listed tools
    ...
    await release_toolsets(agent, request, listed)         # when the workflow ends here

A continuation (``ParkedStep.toolsets``) reuses its run's listings without listing again.
Each listing step also records which toolset each listed tool came from
(``helix.toolset_tools``), so ``helix-dbos show`` and the console name an MCP call with its
server.
A listed tool whose name another tool of the agent has already is left out (logged):
the agent's own tools, then its toolsets in order, win.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from dbos import DBOS

from helix_dbos._durable.payloads import ListedToolsets, RunRequest
from helix_dbos._durable.runtime import current_runtime
from helix_dbos._store import reads, tool_servers
from helix_dbos._store.retry import retry_transient
from helix_dbos.agents import AgentConfig
from helix_dbos.tools import Tool
from helix_dbos.toolsets import Toolset, ToolsetRun

logger = logging.getLogger("helix_dbos")


async def list_toolsets(agent: AgentConfig, request: RunRequest) -> ListedToolsets | None:
    """The run's listings: the parked step's, else one checkpointed step per toolset
    (after one that reads the session's owner). None for an agent without toolsets."""
    if not agent.toolsets:
        return None
    parked = request.parked
    if parked is not None and parked.toolsets is not None:
        return parked.toolsets
    owner = await DBOS.run_step_async({"name": "session_owner"}, session_owner, request.session_id)
    run = ToolsetRun(request.session_id, request.run, agent.name, owner)
    listed = ListedToolsets(owner=owner)
    for toolset in agent.toolsets:
        listed.listings[toolset.name] = await DBOS.run_step_async(
            {"name": f"tools:{toolset.name}"}, list_and_record, toolset, run
        )
    return listed


async def list_and_record(toolset: Toolset, run: ToolsetRun) -> list[dict[str, Any]]:
    """The ``tools:<name>`` step: the toolset's listing, with the names the model calls its
    tools by recorded as the toolset's for the run (again, harmlessly, if the step runs twice)."""
    listing = await toolset.list_tools(run)
    names = [tool.name for tool in toolset.tools(listing, run)]

    def record() -> None:
        with current_runtime().pool.connection() as conn:
            tool_servers.record_toolset_tools(conn, run.session_id, run.run, toolset.name, names)

    await asyncio.to_thread(retry_transient, record)
    return listing


def with_toolset_tools(agent: AgentConfig, request: RunRequest, listed: ListedToolsets | None) -> AgentConfig:
    """``agent`` with the tools of ``listed`` (``agent`` itself without toolsets)."""
    if listed is None:
        return agent
    run = toolset_run(agent, request, listed)
    taken = {tool.name for tool in agent.all_tools()}
    added: list[Tool] = []
    for toolset in agent.toolsets:
        for tool in toolset.tools(listed.listings.get(toolset.name, []), run):
            if tool.name in taken:
                logger.warning("toolset %r: tool %r left out, another tool has its name", toolset.name, tool.name)
                continue
            taken.add(tool.name)
            added.append(tool)
    return agent.with_listed_tools(added)


async def release_toolsets(agent: AgentConfig, request: RunRequest, listed: ListedToolsets | None) -> None:
    """Let each toolset go of what the run held in this process (its connections)."""
    if listed is None:
        return
    run = toolset_run(agent, request, listed)
    await asyncio.gather(*(toolset.release(run) for toolset in agent.toolsets))


def toolset_run(agent: AgentConfig, request: RunRequest, listed: ListedToolsets) -> ToolsetRun:
    return ToolsetRun(request.session_id, request.run, agent.name, listed.owner)


def session_owner(session_id: str) -> str | None:
    """The session's owner (the ``session_owner`` step; retried on connection faults)."""

    def read() -> str | None:
        with current_runtime().pool.connection() as conn:
            row = reads.get_session_row(conn, session_id)
            return row.owner if row is not None else None

    return retry_transient(read)
