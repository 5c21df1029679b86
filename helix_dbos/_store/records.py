"""Typed records crossing between Python and SQL: rows of the ``helix`` schema as the
read API and the CLI return them, and :class:`StepCommit`, what one agent step writes."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from helix_dbos.events import Event, StepStartEvent, parse_event
from helix_dbos._text import storable
from helix_dbos.types import AgentStatus, Message, SessionStatus


class RunRecord(BaseModel):
    """One run (``execute`` or ``resume``) of a session."""

    session_id: str
    run: int
    workflow_id: str
    kind: str
    status: AgentStatus
    start_step: int
    end_step: int | None = None
    start_seq: int
    stop_reason: str | None = None
    error: str | None = None
    started_at: datetime
    ended_at: datetime | None = None
    workflow_status: str | None = None
    """DBOS's status of the run's workflow (PENDING, ENQUEUED, SUCCESS, CANCELLED, ...)."""
    executor_id: str | None = None
    """The DBOS executor that runs (or ran) the workflow."""
    application_version: str | None = None
    """The DBOS application version the workflow belongs to; only processes of that
    version recover it."""
    application_name: str | None = None
    """The DBOS application that owns the workflow."""
    latest_version: str | None = None
    """The newest version registered by the workflow's application."""

    @property
    def stranded(self) -> bool:
        """Waiting to be recovered by a version that is no longer the application's newest
        (``helix-dbos move`` moves it)."""
        return (
            self.workflow_status in ("PENDING", "ENQUEUED")
            and self.latest_version is not None
            and self.application_version not in (None, self.latest_version)
        )


class WorkflowPlacement(BaseModel):
    """Where DBOS placed a workflow."""

    queue: str | None = None


class PendingToolCall(BaseModel):
    """A tool call waiting for a person's approval or a client's result."""

    session_id: str
    tool_call_id: str
    root_session_id: str
    workflow_id: str
    run: int
    step: int
    tool_name: str
    kind: str
    input: Any = None
    output_schema: dict[str, Any] | None = None
    status: str
    requested_at: datetime
    deadline: datetime | None = None


class AnswerWindow(BaseModel):
    """Whether a gated call may take an answer now, read under its row lock by the
    database's clock (``now``); the same ``now`` becomes the answer's ``answered_at``."""

    status: str
    deadline: datetime | None = None
    now: datetime
    answered: bool

    @property
    def expired(self) -> bool:
        """The call's deadline has passed: an answer now is refused."""
        return self.deadline is not None and self.now >= self.deadline


class WaitState(BaseModel):
    """Where a step's gated calls stand: the ones settled since the last look, and how
    long the run may wait before the next deadline passes.

    ``answers`` maps a call id to its answer (the message as recorded) or to None when
    the call timed out; ``wait`` is in seconds by the database's clock, None when every
    call still waiting has no deadline. A checkpoint of the run, so plain JSON.
    """

    answers: dict[str, dict[str, Any] | None] = Field(default_factory=dict)
    wait: float | None = None
    run_ended: bool = False
    """The run no longer holds its session (it was aborted): nothing is left to wait for."""


class EventRecord(BaseModel):
    """One entry of a session's durable stream."""

    session_id: str
    seq: int
    run: int
    step: int
    type: str
    data: Any
    created_at: datetime

    @property
    def event(self) -> Event:
        """The typed event."""
        return parse_event(self.type, self.data)


class AnswerRecord(BaseModel):
    """The audit row of an answered call: who, when, what and why."""

    session_id: str
    tool_call_id: str
    kind: str
    approved: bool | None = None
    reason: str | None = None
    answered_by: str | None = None
    answer: Any = None
    answered_at: datetime


class TranscriptEntry(BaseModel):
    """One message of a transcript with its place in the logs."""

    seq: int
    run: int
    step: int
    message: dict[str, Any]


class UsageSummary(BaseModel):
    """Usage of a session, summed over its LLM calls and tools."""

    llm_calls: int = 0
    tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cost_usd: float | None = None
    llm_ms: float = 0.0
    tool_ms: float = 0.0
    client_tool_wait_ms: float = 0.0
    by_name: dict[str, dict[str, float]] = Field(default_factory=dict)


class SessionRecord(BaseModel):
    """A session as stored: status, counters, output, and (when loaded) transcript and state."""

    id: str
    agent_name: str
    status: SessionStatus
    step_count: int
    run_count: int
    message_count: int
    event_seq: int
    """The last seq of the session's stream. A step in progress may have written events
    after it (those its checkpoints carry); the step's commit brings it level, so it is
    exact whenever no run is in the middle of a step."""
    output: Any = None
    error: str | None = None
    stop_reason: str | None = None
    interrupt_requested: bool = False
    parent_session_id: str | None = None
    parent_tool_call_id: str | None = None
    root_session_id: str
    created_at: datetime
    updated_at: datetime
    """When the session's status last changed: a run began or ended, a wait began or
    ended, an interrupt was asked for (not at every step)."""
    messages: list[Message] = Field(default_factory=list)
    state: dict[str, Any] = Field(default_factory=dict)
    pending: list[PendingToolCall] = Field(default_factory=list)


# --- what one agent step commits ---------------------------------------------------------


class Terminal(BaseModel):
    """How a run ends, when a step ends it."""

    status: AgentStatus
    output: Any = None
    error: str | None = None
    stop_reason: str | None = None


class ResolvedCall(BaseModel):
    """A gated call that leaves the pending list in this step."""

    tool_call_id: str
    status: Literal["answered", "timed_out"]


class KeyedEvent(BaseModel):
    """An event of a step with its key, unique in the session (``<run>.<step>.<part>``):
    writing it again, from a replay or from the commit, writes nothing::

        >>> from helix_dbos.events import StepStartEvent
        >>> KeyedEvent(key="1.2.step_start", event=StepStartEvent(step=2)).to_row()
        {'type': 'step_start', 'data': {'step': 2}, 'key': '1.2.step_start'}
    """

    key: str
    event: Event

    @classmethod
    def at(cls, run: int, step: int, part: str, event: Event) -> KeyedEvent:
        """The event under its key: ``KeyedEvent.at(1, 2, "step_start", ...)`` is ``1.2.step_start``."""
        return cls(key=f"{run}.{step}.{part}", event=event)

    def to_row(self) -> dict[str, Any]:
        return {**self.event.to_row(), "key": self.key}


class StepCommit(BaseModel):
    """Everything one agent step writes, in ONE call to ``helix.commit_step``.

    The commit writes only when the session is active at ``step - 1`` (compare-and-set on
    ``step_count``); a step this run committed already is recognized and not written
    again (:class:`CommitOutcome`).
    """

    session_id: str
    run: int
    step: int
    messages: list[Message] = Field(default_factory=list)
    patch: list[dict[str, Any]] | None = None
    """The step's state change as RFC 6902 operations."""
    snapshot: dict[str, Any] | None = None
    """A full copy of the state after the step, every so many steps."""
    events: list[KeyedEvent] = Field(default_factory=list)
    """Every keyed event of the step; the commit writes those not written while the step ran."""
    next_step: StepStartEvent | None = None
    """The next step's ``step_start``, written when the run goes on after this step. It has
    no key: only this commit writes it, once (a replayed commit writes nothing), and a key
    would cost an entry of the stream's key index a step."""
    terminal: Terminal | None = None
    resolved: list[ResolvedCall] = Field(default_factory=list)

    def to_json_payload(self) -> dict[str, Any]:
        """The jsonb argument of ``helix.commit_step``. The run's own text is made storable
        where it is produced (the LLM and tool steps); what workflow code derives from it
        (a ``finish_with_transform``, a child's error) is made storable here."""
        payload = self.model_dump(mode="json", exclude={"messages", "events", "next_step"})
        payload["messages"] = [m.model_dump(mode="json", exclude_none=True) for m in self.messages]
        payload["events"] = [e.to_row() for e in self.events]
        payload["next_step"] = self.next_step.to_row() if self.next_step is not None else None
        return storable(payload)


class CommitOutcome(BaseModel):
    """What ``helix.commit_step`` answered.

    ``interrupted``: an interrupt requested by anyone ended the run at this step.
    ``replayed``: this run had committed the step already (a replay); nothing was written.
    ``refused``: the session's status when the step was neither the next one nor already
    committed by this run (an aborted run); nothing was written.
    """

    interrupted: bool = False
    replayed: bool = False
    refused: str | None = None


class HookStateSave(BaseModel):
    """What the hooks that observe committed step ``step`` wrote: ONE follow-up save
    (``store.writes.save_hook_state``), made only when they changed the state.

    Refused, writing nothing, once the session has moved on (another run, a later step).
    """

    session_id: str
    run: int
    step: int
    patch: list[dict[str, Any]]
    """The change as RFC 6902 operations, against the state the step committed."""
    snapshot: dict[str, Any] | None = None
    """The state after the hooks, when ``step`` has a full snapshot (it replaces it)."""

    def storable_payload(self) -> dict[str, Any]:
        """The save as JSON Postgres can store (text it cannot hold replaced, ``helix_dbos._text``)."""
        return storable(self.model_dump(mode="json"))


class RecordedOutcome(BaseModel):
    """How one tool call ended, recorded when it did (``helix.tool_outcomes``).

    ``call_digest`` fingerprints the call's name and arguments, so an outcome is reused
    only for the very call that produced it; ``outcome`` is the tool step's ``ToolOutcome``
    as JSON.
    """

    session_id: str
    step: int
    tool_call_id: str
    run: int
    tool_name: str
    call_digest: str
    outcome: dict[str, Any]


class CompanionRecord(BaseModel):
    """A parent's persistent sub-agent, with its session's status and latest output."""

    name: str
    agent_type: str
    mode: str
    child_session_id: str
    status: AgentStatus
    run_count: int
    output: Any = None
    error: str | None = None

    def view(self) -> dict[str, Any]:
        """What the companion tools tell the model about it."""
        view: dict[str, Any] = {
            "name": self.name, "agentType": self.agent_type, "mode": self.mode, "sessionId": self.child_session_id,
            "status": self.status,
        }
        if self.status == "completed":
            view["output"] = self.output
        elif self.error:
            view["error"] = self.error
        return view


class CompanionNotice(BaseModel):
    """A non-blocking companion's run that ended, for its parent's transcript."""

    name: str
    child_session_id: str
    run: int
    status: str
    output: Any = None
    error: str | None = None
    created_at: datetime
