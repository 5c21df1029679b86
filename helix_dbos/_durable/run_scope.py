"""A run as workflow code sees it: its agent, its request, the workflow that runs runs,
and whether this execution is the first::

    scope = RunScope(agent, request, run_workflow=agent_run_workflow, first_execution=True)
    scope.tool("search")              # the agent's tool of that name
    scope.job(step_no, call, state)   # what a tool step runs
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from helix_dbos._durable.payloads import ListedToolsets, RunRequest, ToolJob
from helix_dbos.agents import AgentConfig
from helix_dbos.state import StateTracker
from helix_dbos.tools import HookContext, ReadOnlyState, Tool
from helix_dbos.types import ParsedToolCall

RunWorkflow = Callable[[dict[str, Any]], Coroutine[Any, Any, dict[str, Any]]]
"""A run's workflow function: takes a ``RunRequest`` as JSON, returns the run's result."""

WAITING_READ_ONLY = "on_agent_suspended and on_agent_resumed observe a step while it waits, before it commits"


@dataclass(frozen=True)
class RunScope:
    """One run of one agent, as workflow code sees it."""

    agent: AgentConfig
    request: RunRequest
    run_workflow: RunWorkflow
    """The workflow that runs a run (``helix_agent_run``): a sub-agent's or a companion's
    run is started as one, a child of this run's workflow."""
    first_execution: bool = False
    """This execution of the run's workflow is its first (not a recovery, not a resume):
    none of its steps ran before (``AgentRuntime.first_execution``)."""
    listed: ListedToolsets | None = None
    """What the run's toolsets listed (``agent`` has their tools already); None without toolsets."""

    @property
    def session_id(self) -> str:
        return self.request.session_id

    @property
    def root_session_id(self) -> str:
        return self.request.root_session_id or self.request.session_id

    def tool(self, name: str) -> Tool:
        found = self.agent.get_tool(name)
        assert found is not None, f"the loop only schedules known tools, not {name!r}"
        return found

    def job(self, step_no: int, call: ParsedToolCall, base_state: Any) -> ToolJob:
        return ToolJob(
            self.agent.name, self.session_id, self.request.run, step_no, call, base_state,
            ran_before=not self.first_execution,
        )

    def hook_context(self, step_no: int, state: Any) -> HookContext:
        """What ``on_agent_suspended`` / ``on_agent_resumed`` see: the state before the
        step, read-only (the hooks after the commit write through ``_durable/hooks.py``)."""
        return HookContext(
            self.session_id, self.agent.name, step_no, ReadOnlyState(StateTracker(state).get_state(), WAITING_READ_ONLY)
        )
