"""Typed records crossing between Python and SQL: rows of the ``helix`` schema as the
read API and the CLI return them, and :class:`StepCommit`, what one agent step writes."""

from __future__ import annotations

import warnings
from datetime import datetime
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, Field

from helix_dbos.events import Event, StepStartEvent, parse_event
from helix_dbos.orchestration.status import statuses_after_step
from helix_dbos._text import storable
from helix_dbos.types import AgentStatus, Message, SessionStatus


class RunAdoption(BaseModel):
    """A run a live process adopted from a worker that died or stopped with the run in progress."""

    from_executor: str
    """The worker whose run it was."""
    from_status: str
    """``dead`` (its lease expired: killed, frozen, cut off) or ``released`` (it stopped
    and left the run to the others)."""
    adopted_by: str
    """The process that handed the run back to its queue, where any worker resumed it."""
    adopted_at: datetime

    def summary(self) -> str:
        """In words, as ``helix-dbos show`` and the console say it::

            adopted by w-2 at 09:41:07 after worker w-1 died
        """
        why = "died" if self.from_status == "dead" else "stopped"
        return f"adopted by {self.adopted_by} at {self.adopted_at:%Y-%m-%d %H:%M:%S} after worker {self.from_executor} {why}"


class RunRecord(BaseModel):
    """One run (``execute`` or ``resume``) of a session.

    Attributes:
        session_id: The session.
        run: The run's number within the session, from 1.
        workflow_id: The DBOS workflow that runs it (``helix:<session>:run:<n>``).
        kind: ``execute`` or ``resume``.
        status: The run's status.
        start_step: The session's step count when the run began.
        end_step: The step count when it ended, or None while it runs.
        start_seq: The ``seq`` of its first event in the session's stream.
        stop_reason: Why it ended, or None.
        error: Its error, when it failed.
        started_at: When it began.
        ended_at: When it ended, or None.
    """

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
    adoptions: list[RunAdoption] = Field(default_factory=list)
    """Each time a live process adopted the run from a worker that died or stopped, oldest first."""

    @property
    def stranded(self) -> bool:
        """Waiting to be recovered by a version that is no longer the application's newest
        (``helix-dbos move`` moves it)."""
        return (
            self.workflow_status in ("PENDING", "ENQUEUED")
            and self.latest_version is not None
            and self.application_version not in (None, self.latest_version)
        )


class PendingToolCall(BaseModel):
    """A tool call waiting for a person's approval or a client's result.

    Attributes:
        session_id: The session whose step made the call (a sub-agent's, maybe).
        tool_call_id: The call's id.
        root_session_id: The session at the top of its sub-agent tree.
        workflow_id: The workflow that waits for the answer.
        run: The run's number.
        step: The step that made the call.
        tool_name: The tool's name.
        kind: ``approval`` or ``client``.
        input: The call's arguments.
        output_schema: A client tool's output JSON Schema, or None.
        status: ``pending`` until answered.
        requested_at: When the call began to wait.
        deadline: When it times out, or None.
    """

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
    """One entry of a session's durable stream.

    Attributes:
        session_id: The session.
        seq: The event's place in the session's stream, from 1.
        run: The run that wrote it.
        step: The step that wrote it.
        type: The event's type (see :data:`~helix_dbos.events.Event`).
        data: Its other fields.
        created_at: When it was written.
    """

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
    """The audit row of an answered call: who, when, what and why.

    Attributes:
        session_id: The session the call belongs to.
        tool_call_id: The call.
        kind: ``approval`` or ``client``.
        approved: The decision, for an approval.
        reason: Why, for an approval.
        answered_by: Who answered.
        answer: The answer as recorded.
        answered_at: When.
    """

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
    """Usage of a session, summed over its LLM calls and tools.

    Attributes:
        llm_calls: Model calls.
        tool_calls: Tool calls.
        input_tokens: Tokens of the prompts.
        output_tokens: Tokens of the answers.
        total_tokens: Both.
        cost_usd: The cost in US dollars, when known.
        llm_ms: Milliseconds spent in model calls.
        tool_ms: Milliseconds spent in tools.
        client_tool_wait_ms: Milliseconds spent waiting for client tools.
        by_name: The same figures by model and by tool name.
    """

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
    """A session as stored: status, counters, output, and (when loaded) transcript and state.

    Its id is ``session_id``, as every other record and the CLI's ``--json`` name it (the
    older ``id`` still reads it, with a :class:`DeprecationWarning`, for one release).

    Attributes:
        session_id: The session id.
        agent_name: The session's agent.
        status: The session's status.
        step_count: Committed steps.
        run_count: Runs started.
        message_count: Messages in the transcript.
        output: The last run's output.
        error: The last run's error.
        stop_reason: Why the last run stopped.
        interrupt_requested: An interrupt waits for the current step to end.
        parent_session_id: The parent's session, for a sub-agent's session.
        parent_tool_call_id: The parent's call that started it.
        root_session_id: The session at the top of its sub-agent tree.
        created_at: When the session was made.
        messages: The transcript (filled in by ``get_session``).
        state: The custom state (filled in by ``get_session``).
        pending: The calls waiting for an answer (filled in by ``get_session``).
    """

    session_id: str = Field(validation_alias=AliasChoices("session_id", "id"))
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
    owner: str | None = None
    """Who the session belongs to (a sub-agent's: its root's); None for a session created
    without an owner, which the agent server shows only to whom its ``authorize`` allows."""
    created_at: datetime
    updated_at: datetime
    """When the session's status last changed: a run began or ended, a wait began or
    ended (not at every step, a state change or an interrupt being asked for)."""
    messages: list[Message] = Field(default_factory=list)
    state: dict[str, Any] = Field(default_factory=dict)
    pending: list[PendingToolCall] = Field(default_factory=list)

    @property
    def id(self) -> str:
        """Deprecated: :attr:`session_id`."""
        warnings.warn(
            "SessionRecord.id is deprecated and will be removed in the next release; use session_id",
            DeprecationWarning, stacklevel=2,
        )
        return self.session_id


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
    fresh: bool = False
    """Nothing of the step can be in the stream yet (the run's first execution wrote none
    of its events before the commit): the commit writes ``events`` without looking their
    keys up. Wrong, it is refused by the stream's key index and made again without."""

    def to_json_payload(self) -> dict[str, Any]:
        """The jsonb argument of ``helix.commit_step``. The run's own text is made storable
        where it is produced (the LLM and tool steps); what workflow code derives from it
        (a ``finish_with_transform``, a child's error) is made storable here."""
        payload = self.model_dump(mode="json", exclude={"messages", "events", "next_step"})
        payload["messages"] = [m.model_dump(mode="json", exclude_none=True) for m in self.messages]
        payload["events"] = [e.to_row() for e in self.events]
        payload["next_step"] = self.next_step.to_row() if self.next_step is not None else None
        status, if_interrupted = statuses_after_step(self.terminal.status if self.terminal is not None else None)
        payload["status"], payload["status_if_interrupted"] = status.value, if_interrupted.value
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
