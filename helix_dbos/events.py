"""The events of a session's durable stream: one discriminated union, :data:`Event`.

The runtime writes them (``helix.events``: a ``type``
column and a ``data`` jsonb of the other fields), streams and the CLI read them back, and
each says what it is in one line::

    >>> event = ToolCallEvent(tool_call_id="t1", tool_name="search", input={"q": "dbos"})
    >>> event.to_row()
    {'type': 'tool_call', 'data': {'tool_call_id': 't1', 'tool_name': 'search', 'input': {'q': 'dbos'}}}
    >>> parse_event("tool_call", event.to_row()["data"]) == event
    True
    >>> event.summary()
    'search [t1] {"q":"dbos"}'

A run's stream starts with ``run_start`` and ends with one of :data:`RUN_END_EVENTS`,
followed by a ``state_patch`` when the hooks that observe its last step changed the state.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, ClassVar, Literal, Union, get_args

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter


def compact(value: Any, width: int = 60) -> str:
    """``value`` on one line, JSON for non-strings, cut to ``width`` characters.

    Args:
        value: Any JSON-able value.
        width: The most characters to return.

    Returns:
        The text, ending in ``...`` when it was cut.
    """
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


class _Event(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: str
    ends_run: ClassVar[bool] = False

    def to_row(self) -> dict[str, Any]:
        """``{"type", "data"}`` as written to the stream.

        Returns:
            The row.
        """
        return {"type": self.type, "data": self.model_dump(mode="json", exclude={"type"})}

    def summary(self) -> str:
        """What happened, in one line (for ``helix-dbos tail`` and the demo).

        Returns:
            The line.
        """
        return compact(self.model_dump(mode="json", exclude={"type"}), 100)


class _CallEvent(_Event):
    tool_call_id: str
    tool_name: str
    input: Any = None

    def summary(self) -> str:
        """What happened, in one line (for ``helix-dbos tail`` and the demo).

        Returns:
            The line.
        """
        return f"{self.tool_name} [{self.tool_call_id}] {compact(self.input)}"


class RunStartEvent(_Event):
    """A run began: ``kind`` is ``execute`` (with the user's ``input``) or ``resume``.

    Attributes:
        run: The run's number.
        kind: ``execute`` or ``resume``.
        input: The user's input, for ``execute``.
    """

    type: Literal["run_start"] = "run_start"
    run: int
    kind: str
    input: str | None = None

    def summary(self) -> str:
        """What happened, in one line (for ``helix-dbos tail`` and the demo).

        Returns:
            The line.
        """
        return f"run {self.run} ({self.kind}) input {compact(self.input)}"


class StepStartEvent(_Event):
    """A step began (``step`` from 0 within the session).

    Attributes:
        step: The step's number.
    """

    type: Literal["step_start"] = "step_start"
    step: int

    def summary(self) -> str:
        """What happened, in one line (for ``helix-dbos tail`` and the demo).

        Returns:
            The line.
        """
        return f"step {self.step}"


class TextEvent(_Event):
    """The model's text of one step.

    Attributes:
        content: The text.
    """

    type: Literal["text"] = "text"
    content: str

    def summary(self) -> str:
        """What happened, in one line (for ``helix-dbos tail`` and the demo).

        Returns:
            The line.
        """
        return compact(self.content, 100)


class ToolCallEvent(_CallEvent):
    """The model called a tool.

    Attributes:
        tool_call_id: The call's id.
        tool_name: The tool's name.
        input: The call's arguments.
    """

    type: Literal["tool_call"] = "tool_call"


class ApprovalRequestEvent(_CallEvent):
    """A call waits for a person's approval.

    Attributes:
        tool_call_id: The call's id.
        tool_name: The tool's name.
        input: The call's arguments.
    """

    type: Literal["tool_approval_request"] = "tool_approval_request"


class ClientToolRequestEvent(_CallEvent):
    """A client-executed call waits for the client's result.

    Attributes:
        tool_call_id: The call's id.
        tool_name: The tool's name.
        input: The call's arguments.
    """

    type: Literal["tool_start"] = "tool_start"


class ToolResultEvent(_Event):
    """A tool call's result, as the model receives it (``is_error`` when it failed).

    Attributes:
        tool_call_id: The call's id.
        tool_name: The tool's name.
        content: The result as JSON text, or the error's text.
        is_error: The call failed (or was denied, or timed out).
    """

    type: Literal["tool_result"] = "tool_result"
    tool_call_id: str
    tool_name: str
    content: str
    is_error: bool = False
    ms: float | None = None
    """How long the tool ran, in milliseconds, for a call its tool step ran; None for one
    answered without running here (denied, timed out, a client's). The usage ledger
    counts a committed step's tool calls from these."""
    error_type: str | None = None
    """The class of the exception the tool raised (``"KeyError"``); left out of the
    event's data when the tool did not raise."""

    def to_row(self) -> dict[str, Any]:
        """``{"type", "data"}`` as written to the stream, without ``error_type`` when it is None.

        Returns:
            The row.
        """
        row = super().to_row()
        if self.error_type is None:
            del row["data"]["error_type"]
        return row

    def summary(self) -> str:
        """What happened, in one line (for ``helix-dbos tail`` and the demo).

        Returns:
            The line.
        """
        flag = " error" if self.is_error else ""
        return f"{self.tool_name} [{self.tool_call_id}]{flag}: {compact(self.content, 80)}"


class StatePatchEvent(_Event):
    """The step's state change, as RFC 6902 operations.

    Attributes:
        patches: The RFC 6902 operations.
    """

    type: Literal["state_patch"] = "state_patch"
    patches: list[dict[str, Any]]

    def summary(self) -> str:
        """What happened, in one line (for ``helix-dbos tail`` and the demo).

        Returns:
            The line.
        """
        return compact(self.patches, 100)


class StepFinishEvent(_Event):
    """A step was committed: why the model stopped, and the step's ``usage``.

    Attributes:
        step: The step's number.
        stop_reason: Why the model stopped.
        usage: The step's usage.
    """

    type: Literal["step_finish"] = "step_finish"
    step: int
    stop_reason: str | None = None
    usage: dict[str, Any] = Field(default_factory=dict)

    def summary(self) -> str:
        """What happened, in one line (for ``helix-dbos tail`` and the demo).

        Returns:
            The line.
        """
        return f"step {self.step}" + (f" ({self.stop_reason})" if self.stop_reason else "")


class FinishEvent(_Event):
    """The run completed with ``output``; ``usage`` is the run's model usage, summed.

    Attributes:
        output: The agent's output.
        stop_reason: Why the run stopped.
        usage: The run's model usage, summed.
    """

    type: Literal["finish"] = "finish"
    ends_run: ClassVar[bool] = True
    output: Any = None
    stop_reason: str | None = None
    usage: dict[str, Any] = Field(default_factory=dict)

    def summary(self) -> str:
        """What happened, in one line (for ``helix-dbos tail`` and the demo).

        Returns:
            The line.
        """
        return f"output {compact(self.output, 100)}"


class ErrorEvent(_Event):
    """The run failed.

    Attributes:
        error: Why the run failed.
        stop_reason: The stop reason that failed it, if any.
    """

    type: Literal["error"] = "error"
    ends_run: ClassVar[bool] = True
    error: str | None = None
    stop_reason: str | None = None

    def summary(self) -> str:
        """What happened, in one line (for ``helix-dbos tail`` and the demo).

        Returns:
            The line.
        """
        return str(self.error)


class InterruptedEvent(_Event):
    """The run stopped after ``step`` because someone asked it to; it can be resumed.

    Attributes:
        step: The last committed step.
    """

    type: Literal["interrupted"] = "interrupted"
    ends_run: ClassVar[bool] = True
    step: int


class AbortedEvent(_Event):
    """The run's workflow was cancelled (by helix, or by DBOS's own tools).

    Attributes:
        reason: Why, as given to ``abort``.
    """

    type: Literal["aborted"] = "aborted"
    ends_run: ClassVar[bool] = True
    reason: str | None = None


class ResumedEvent(_Event):
    """A cancelled or failed run's workflow was resumed where it stopped.

    Attributes:
        run: The run resumed.
        workflow_id: Its workflow.
    """

    type: Literal["resumed"] = "resumed"
    run: int
    workflow_id: str


class ForkedEvent(_Event):
    """The first event of a session made by ``fork``.

    Attributes:
        source_session_id: The session it was forked from.
        from_step: The source's step it starts from.
    """

    type: Literal["forked"] = "forked"
    source_session_id: str
    from_step: int


class CustomEvent(_Event):
    """An event a tool emitted with ``ctx.emit(name, data)``.

    Attributes:
        name: The event's type, as the tool named it.
        data: Its data.
        tool_call_id: The call that emitted it.
    """

    type: Literal["custom"] = "custom"
    name: str
    data: Any = None
    tool_call_id: str | None = None


class SubAgentStartEvent(_Event):
    """A sub-agent call started the child session ``session_id``.

    Attributes:
        tool_call_id: The parent's call.
        session_id: The child's session.
        agent: The child's agent.
    """

    type: Literal["subagent_start"] = "subagent_start"
    tool_call_id: str
    session_id: str
    agent: str


class SubAgentEventEvent(_Event):
    """One event of a sub-agent's stream, relayed into its parent's.

    Attributes:
        session_id: The child's session.
        event: The child's event, as ``{"type", "data", ...}``.
    """

    type: Literal["subagent_event"] = "subagent_event"
    session_id: str
    event: dict[str, Any]

    def summary(self) -> str:
        """What happened, in one line (for ``helix-dbos tail`` and the demo).

        Returns:
            The line.
        """
        return f"{self.session_id}: {self.event.get('type')} {compact(self.event.get('data'))}"


class SubAgentFinishEvent(_Event):
    """A sub-agent's session ended with ``status``.

    Attributes:
        tool_call_id: The parent's call.
        session_id: The child's session.
        status: How the child's run ended.
    """

    type: Literal["subagent_finish"] = "subagent_finish"
    tool_call_id: str
    session_id: str
    status: str


Event = Annotated[
    Union[
        RunStartEvent,
        StepStartEvent,
        TextEvent,
        ToolCallEvent,
        ApprovalRequestEvent,
        ClientToolRequestEvent,
        ToolResultEvent,
        StatePatchEvent,
        StepFinishEvent,
        FinishEvent,
        ErrorEvent,
        InterruptedEvent,
        AbortedEvent,
        ResumedEvent,
        ForkedEvent,
        CustomEvent,
        SubAgentStartEvent,
        SubAgentEventEvent,
        SubAgentFinishEvent,
    ],
    Field(discriminator="type"),
]
"""Any event of the durable stream, discriminated by ``type``."""

_EVENT: TypeAdapter[Event] = TypeAdapter(Event)

_FIELDS: dict[str, frozenset[str]] = {
    kind.model_fields["type"].default: frozenset(kind.model_fields) for kind in get_args(get_args(Event)[0])
}
"""The fields of each type of event, by ``type``."""

EVENT_TYPES: tuple[str, ...] = tuple(_FIELDS)
"""Every ``type`` an event of the stream can have (an SSE client listens for each)."""

RUN_END_EVENTS: frozenset[str] = frozenset({"finish", "error", "interrupted", "aborted"})
"""Types of the events that end a run."""


def parse_event(event_type: str, data: Any) -> Event:
    """The :data:`Event` stored as ``type`` and ``data``. A field its type does not have
    is left out, so this release reads what a later one adds to an event while a deploy
    rolls (a missing field or an unknown type is still an error)::

        >>> parse_event("step_start", {"step": 2, "added_later": True})
        StepStartEvent(type='step_start', step=2)

    Args:
        event_type: The event's ``type``.
        data: Its other fields, as stored.

    Returns:
        The event.

    Raises:
        pydantic.ValidationError: An unknown type, or a field the type needs is missing.
    """
    fields = data if isinstance(data, dict) else {}
    known = _FIELDS.get(event_type)
    if known is not None:
        fields = {name: value for name, value in fields.items() if name in known}
    return _EVENT.validate_python({**fields, "type": event_type})
