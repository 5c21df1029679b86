"""Small values that cross DBOS boundaries: workflow inputs and step outputs.

They are checkpointed in DBOS's system tables as portable JSON; these models keep them
small and plain. Everything a person reads lives as JSON in the ``helix`` schema.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from helix_dbos.orchestration import RunawayGuard

WORKFLOW_NAME = "helix_agent_run"
"""The registered name of the agent-run workflow (durable/workflow.py)."""

WAITER_WORKFLOW_NAME = "helix_await_answers"
"""The registered name of the workflow that waits for a parked step's answers (durable/workflow.py)."""

WORKFLOW_PROTOCOL_VERSION = "7"
"""Bumped when the workflow's sequence of DBOS calls changes incompatibly."""


def run_workflow_id(session_id: str, run: int) -> str:
    """The DBOS workflow id of run ``run`` of a session: stable, so starting twice is a no-op."""
    return f"helix:{session_id}:run:{run}"


def waiter_workflow_id(session_id: str, run: int, step: int) -> str:
    """The DBOS workflow id that waits for the answers of a parked step of a run."""
    return f"{run_workflow_id(session_id, run)}:wait:{step}"


def continuation_workflow_id(session_id: str, run: int, step: int) -> str:
    """The DBOS workflow id that continues a run from its parked step once it is answered."""
    return f"{run_workflow_id(session_id, run)}:step:{step}"


def continued_by(output: Any) -> str | None:
    """The workflow that carries a run on, when ``output`` (a helix workflow's output) says
    the run parked or its answers were collected; None for a run's final result."""
    return output.get("continued_by") if isinstance(output, dict) else None


class ToolOutcome(BaseModel):
    """The checkpointed output of one tool step (``durable/steps.py``: ``tool_checkpoint``,
    ``tool_outcome``)."""

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


class ParkedStep(BaseModel):
    """Where a run stopped to wait for people: what its continuation needs to finish the step.

    The run's workflow ends at a step with gated calls once the other calls ran; the waiter
    workflow fills ``answers`` and starts the continuation with this in its request.
    """

    step: int
    llm: list[dict[str, Any]]
    """The ``llm`` checkpoints of the run's steps so far, the parked step's last."""
    guard: RunawayGuard
    gates: dict[str, str]
    ran: list[ToolOutcome]
    """The outcomes of the step's calls that did not wait."""
    first_step: int
    queue: str | None = None
    """The queue the run's workflows take (None: started directly, as a child workflow)."""
    notices: list[dict[str, Any]] = Field(default_factory=list)
    """The companion notices the step took into its transcript (``durable/companions.py``)."""
    answers: dict[str, dict[str, Any] | None] = Field(default_factory=dict)
    """Each gated call's answer as recorded (None: it timed out), filled by the waiter."""


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
    parked: ParkedStep | None = None
    """Set for a continuation: the run resumes its parked step (``continuation_workflow_id``)."""
    trace_parent: str | None = None
    """The W3C ``traceparent`` of the span the run was started from (the caller's, or the
    call that started a child), which the run's spans nest under (``observability/tracing.py``)."""

    @property
    def workflow_id(self) -> str:
        """The DBOS workflow this request is the input of."""
        if self.parked is None:
            return run_workflow_id(self.session_id, self.run)
        return continuation_workflow_id(self.session_id, self.run, self.parked.step)


class WaitRequest(BaseModel):
    """The input of the ``helix_await_answers`` workflow: the parked step's gated calls
    and the continuation to start once they are answered or timed out."""

    session_id: str
    run: int
    step: int
    tool_call_ids: list[str]
    continuation: RunRequest


class RunStart(BaseModel):
    """What the run's first transaction found: where the run starts in the logs, or why
    the run must not touch the session (``refused``; nothing was written)."""

    step_count: int = 0
    message_seq: int = 0
    start_seq: int = 0
    queue: str | None = None
    """The queue of the run's workflow (None when it was started directly)."""
    refused: str | None = None
