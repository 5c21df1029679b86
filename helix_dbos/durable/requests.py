"""Small values that cross DBOS boundaries: workflow inputs and step outputs.

They are checkpointed in DBOS's system tables as portable JSON; these models keep them
small and plain. Everything a person reads lives as JSON in the ``helix`` schema.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

WORKFLOW_NAME = "helix_agent_run"
"""The registered name of the agent-run workflow (durable/workflow.py)."""

WORKFLOW_PROTOCOL_VERSION = "5"
"""Bumped when the workflow's sequence of DBOS calls changes incompatibly."""


def run_workflow_id(session_id: str, run: int) -> str:
    """The DBOS workflow id of run ``run`` of a session: stable, so starting twice is a no-op."""
    return f"helix:{session_id}:run:{run}"


class RunRequest(BaseModel):
    """The input of the ``helix_agent_run`` workflow."""

    session_id: str
    run: int
    agent_name: str
    kind: Literal["execute", "resume"] = "execute"
    input: str | None = None
    parent_session_id: str | None = None
    parent_tool_call_id: str | None = None
    root_session_id: str | None = None


class RunStart(BaseModel):
    """What the run's first transaction found: where the run starts in the logs, or why
    the run must not touch the session (``refused``; nothing was written)."""

    step_count: int = 0
    message_seq: int = 0
    start_seq: int = 0
    refused: str | None = None


class ToolOutcome(BaseModel):
    """The checkpointed output of one tool step."""

    tool_call_id: str
    tool_name: str
    success: bool
    result: Any = None
    error: str | None = None
    writes: list[Any] = Field(default_factory=list)
    ms: float = 0.0
    events: list[dict[str, Any]] = Field(default_factory=list)
    executed: bool = True
    """False for a gated call answered without running here (denied, timed out, client-executed)."""
