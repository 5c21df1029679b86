"""Small values that cross DBOS boundaries: workflow inputs, step inputs and step
outputs, and the JSON each step checkpoints.

They are checkpointed in DBOS's system tables as portable JSON; these models keep them
small and plain. Everything a person reads lives as JSON in the ``helix`` schema::

    request = RunRequest(session_id="s1", run=1, agent_name="researcher", input="hi")
    request.workflow_id                                   # 'helix:s1:run:1'
    tool_outcome(call, tool_checkpoint(outcome)) == outcome   # a tool step's checkpoint, read back
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field

from helix_dbos.orchestration import RunawayGuard
from helix_dbos.orchestration.messages import create_tool_result_message
from helix_dbos._text import storable
from helix_dbos.types import ParsedToolCall, StepResult, StepResultAdapter, ToolResultMessage, Usage

WORKFLOW_NAME = "helix_agent_run"
"""The registered name of the agent-run workflow (_durable/workflow.py)."""

WAITER_WORKFLOW_NAME = "helix_await_answers"
"""The registered name of the workflow that waits for a parked step's answers (_durable/workflow.py)."""

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
    """The checkpointed output of one tool step (its JSON: :func:`tool_checkpoint`,
    :func:`tool_outcome`)."""

    tool_call_id: str
    tool_name: str
    success: bool
    result: Any = None
    error: str | None = None
    error_type: str | None = None
    """The class of the exception the tool raised (``"KeyError"``); None when it did not raise."""
    writes: list[Any] = Field(default_factory=list)
    ms: float = 0.0
    events: list[dict[str, Any]] = Field(default_factory=list)
    executed: bool = True
    """False for a gated call answered without running here (denied, timed out, client-executed)."""
    memory: list[dict[str, Any]] = Field(default_factory=list)
    """The memory writes of the call (``ctx.memory``, as ``MemoryWrite`` JSON), committed with its step."""

    def message(self) -> ToolResultMessage:
        """The tool result message the model gets. ``result`` is JSON data already (the
        tool's output as :meth:`~helix_dbos.tools.Tool.dump_output` made it, or read from a
        checkpoint or an answer), so it is written as it is, not converted again."""
        if not self.success:
            return create_tool_result_message(self.tool_call_id, self.tool_name, success=False, error=self.error)
        content = json.dumps(self.result, separators=(",", ":"), ensure_ascii=False)
        return ToolResultMessage(tool_call_id=self.tool_call_id, tool_name=self.tool_name, content=content)


class ListedToolsets(BaseModel):
    """What a run's toolsets listed, once per run (``_durable/toolset_runs.py``): the
    session's owner they serve and each toolset's listing, by toolset name."""

    owner: str | None = None
    listings: dict[str, list[dict[str, Any]]] = Field(default_factory=dict)


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
    """The companion notices the step took into its transcript (``_durable/children/companion_calls.py``)."""
    answers: dict[str, dict[str, Any] | None] = Field(default_factory=dict)
    """Each gated call's answer as recorded (None: it timed out), filled by the waiter."""
    toolsets: ListedToolsets | None = None
    """What the run's toolsets listed: the continuation offers the same tools."""


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
    owner: str | None = None
    """Who a new root session belongs to (a sub-agent's session takes its root's owner)."""
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


CallKey = tuple[str, int, str, str]
"""(session id, step, tool call id, call digest)."""


@dataclass
class ToolJob:
    """What a tool step needs: the call and the state it starts from."""

    agent_name: str
    session_id: str
    run: int
    step: int
    call: ParsedToolCall
    base_state: dict[str, Any]
    ran_before: bool = True
    """Whether an earlier execution of the run's workflow may have run this step; when not,
    no outcome can be recorded for it and the step does not look for one."""
    attempt_record: asyncio.Future[None] | None = None
    """This process's record of its attempt at the call, made with the step's other calls
    while their steps begin (``_durable/tool_execution/attempts.py``): the body waits for
    it. None when the step records its attempt itself."""

    @functools.cached_property
    def key(self) -> CallKey:
        """The call's :data:`CallKey`, its digest computed once for the step and the code
        that waits for the step's checkpoint."""
        return (self.session_id, self.step, self.call.id, call_digest(self.call))


def call_digest(call: ParsedToolCall) -> str:
    """A fingerprint of the call's name and arguments: a recorded outcome is reused only
    for the call that produced it."""
    text = json.dumps([call.name, call.arguments, call.parse_error], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def llm_output(checkpoint: dict[str, Any]) -> tuple[StepResult, Usage]:
    """The LLM step's result and usage, from its JSON checkpoint."""
    return StepResultAdapter.validate_python(checkpoint["result"]), Usage.model_validate(checkpoint["usage"])


def tool_checkpoint(outcome: ToolOutcome) -> dict[str, Any]:
    """A tool outcome as the JSON its step checkpoints and records, storable in Postgres,
    without what the step already says: the tool's name (the step is ``tool:<name>``) and
    ``success`` when true (read back with :func:`tool_outcome`)::

        >>> tool_checkpoint(ToolOutcome(tool_call_id="a", tool_name="t", success=True, result={"ok": 1}, ms=0.2))
        {'tool_call_id': 'a', 'result': {'ok': 1}, 'ms': 0.2}
        >>> tool_checkpoint(ToolOutcome(tool_call_id="a", tool_name="t", success=False, error="no"))
        {'tool_call_id': 'a', 'success': False, 'error': 'no'}

    The call's id stays, though :func:`tool_outcome` does not need it: a checkpoint says
    which call it answers to whoever reads it with DBOS's tools.
    """
    data = checkpoint_json(outcome)
    del data["tool_name"]
    if outcome.success:
        del data["success"]
    return storable(data)


def tool_outcome(call: ParsedToolCall, checkpoint: dict[str, Any]) -> ToolOutcome:
    """The outcome of ``call``'s tool step, from its checkpoint; what the step says
    (the call's id, the tool's name) and ``success`` (true unless said) are filled in
    when the checkpoint leaves them out::

        >>> tool_outcome(ParsedToolCall(id="a", name="t", arguments={}), {"result": {"ok": 1}})
        ToolOutcome(tool_call_id='a', tool_name='t', success=True, result={'ok': 1}, error=None, \
error_type=None, writes=[], ms=0.0, events=[], executed=True, memory=[])
    """
    said = {"tool_call_id": call.id, "tool_name": call.name, "success": True}
    return ToolOutcome.model_validate({**said, **checkpoint})


def checkpoint_json(model: BaseModel) -> dict[str, Any]:
    """``model`` as the JSON of a checkpoint: fields at their defaults are left out (read
    back, they are their defaults again), except a step result's ``type``, which says what
    kind of result it is.

        >>> checkpoint_json(Usage(input_tokens=100, total_tokens=100))
        {'input_tokens': 100, 'total_tokens': 100}
        >>> checkpoint_json(StepResultAdapter.validate_python({"type": "text", "content": "hi"}))
        {'type': 'text', 'content': 'hi'}
    """
    data = model.model_dump(mode="json", exclude_defaults=True)
    kind = getattr(model, "type", None)
    return data if kind is None else {"type": kind, **data}
