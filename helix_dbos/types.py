"""Core value types shared by every layer: messages, step results, usage, LLM config.

Everything here is a pydantic model that round-trips through JSON, so messages and
results can be stored as ``jsonb`` and read by people and other processes::

    >>> msg = AssistantMessage(tool_calls=[ParsedToolCall(id="t1", name="search", arguments={"q": "x"})])
    >>> AssistantMessage.model_validate_json(msg.model_dump_json()) == msg
    True

Field names are snake_case; each maps one to one to a camelCase name
(``toolCalls`` -> ``tool_calls``, ``stopReason`` -> ``stop_reason``).
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

StopReason = Literal[
    "end_turn",
    "tool_use",
    "max_tokens",
    "stop_sequence",
    "content_filter",
    "refusal",
    "error",
    "unknown",
]
"""Why the model stopped generating. Error reasons make a run fail."""

SUB_AGENT_TOOL_PREFIX = "subagent__"
COMPANION_TOOL_PREFIX = "companion__"
FINISH_TOOL_NAME = "__finish__"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False)


class ThinkingContent(_Model):
    """A model's reasoning trace, kept beside the message it belongs to.

    Attributes:
        content: The reasoning text.
        signature: The provider's signature of it, sent back with it.
    """

    content: str
    signature: str | None = None


class ParsedToolCall(_Model):
    """One tool invocation requested by the model.

    ``parse_error`` is set by an adapter when the model's argument JSON could not be
    parsed; ``arguments`` then holds the raw text and the runtime answers the call with
    a tool error instead of running the tool.

    Attributes:
        id: The call's id, unique within the session.
        name: The tool's name.
        arguments: The arguments, parsed from the model's JSON.
        parse_error: Why the arguments could not be parsed, or None.
    """

    id: str
    name: str
    arguments: Any = None
    parse_error: str | None = None


class ParsedSubAgentCall(_Model):
    """A call to a sub-agent tool (``subagent__<agent_type>``), parsed out of the tool calls."""

    id: str
    agent_type: str
    input: Any = None
    parse_error: str | None = None


# --- messages ---------------------------------------------------------------------


class SystemMessage(_Model):
    """The system prompt, the first message a model receives (never stored in the transcript).

    Attributes:
        content: The prompt's text.
    """

    role: Literal["system"] = "system"
    content: str


class UserMessage(_Model):
    """A user's message: the input of a run, or a note the runtime adds for the model.

    Attributes:
        content: The message's text (input that is not a string arrives as JSON text).
    """

    role: Literal["user"] = "user"
    content: str


class AssistantMessage(_Model):
    """One step's answer of the model: text, tool calls, or both.

    Attributes:
        content: The model's text, or None.
        tool_calls: The tools the model called, in its order.
        thinking: The model's reasoning, when the provider returns it.
    """

    role: Literal["assistant"] = "assistant"
    content: str | None = None
    tool_calls: list[ParsedToolCall] = Field(default_factory=list)
    thinking: ThinkingContent | None = None


class ToolResultMessage(_Model):
    """The result of one tool call; ``content`` is the JSON-encoded result or the error text.

    Attributes:
        tool_call_id: The id of the call it answers.
        tool_name: The tool's name.
        content: The JSON-encoded result, or the error text.
        is_error: The call failed (or was denied, or timed out).
    """

    role: Literal["tool"] = "tool"
    tool_call_id: str
    tool_name: str
    content: str
    is_error: bool = False


Message = Annotated[
    Union[SystemMessage, UserMessage, AssistantMessage, ToolResultMessage],
    Field(discriminator="role"),
]
"""Any message of a transcript, discriminated by ``role``."""

MessageAdapter: TypeAdapter[Message] = TypeAdapter(Message)
MessageListAdapter: TypeAdapter[list[Message]] = TypeAdapter(list[Message])


# --- step results -----------------------------------------------------------------


class TextStepResult(_Model):
    """A model answer of text alone.

    Attributes:
        content: The text.
        thinking: The model's reasoning, when the provider returns it.
        should_stop: The answer ends the run.
        stop_reason: Why the model stopped generating.
    """

    type: Literal["text"] = "text"
    content: str
    thinking: ThinkingContent | None = None
    should_stop: bool = False
    stop_reason: StopReason | None = None


class ToolCallsStepResult(_Model):
    """A model answer that calls tools (and sub-agents), with optional text.

    Attributes:
        content: The model's text, or None.
        tool_calls: The tool calls, in the model's order.
        sub_agent_calls: The calls of ``subagent__`` tools, filled in by the runtime.
        thinking: The model's reasoning, when the provider returns it.
        stop_reason: Why the model stopped generating.
    """

    type: Literal["tool_calls"] = "tool_calls"
    content: str | None = None
    tool_calls: list[ParsedToolCall] = Field(default_factory=list)
    sub_agent_calls: list[ParsedSubAgentCall] = Field(default_factory=list)
    thinking: ThinkingContent | None = None
    stop_reason: StopReason | None = None


class StructuredOutputStepResult(_Model):
    """A model answer that is the agent's structured output itself.

    Attributes:
        output: The output, checked against the agent's ``output_schema``.
        stop_reason: Why the model stopped generating.
    """

    type: Literal["structured_output"] = "structured_output"
    output: Any
    stop_reason: StopReason | None = None


class ErrorStepResult(_Model):
    """The LLM call failed. ``error`` is the message; ``error_type`` the exception class name.

    Attributes:
        error: The message.
        error_type: The exception's class name.
        should_stop: The run stops (always, for an error).
        stop_reason: ``error``, or the provider's reason.
    """

    type: Literal["error"] = "error"
    error: str
    error_type: str | None = None
    should_stop: bool = True
    stop_reason: StopReason | None = None


StepResult = Annotated[
    Union[TextStepResult, ToolCallsStepResult, StructuredOutputStepResult, ErrorStepResult],
    Field(discriminator="type"),
]
"""What one model call returned, discriminated by ``type``."""

StepResultAdapter: TypeAdapter[StepResult] = TypeAdapter(StepResult)


# --- LLM-facing configuration ---------------------------------------------------------


class Usage(_Model):
    """Token usage, cost and latency of one LLM call (or a sum of several, with ``+``).

    Attributes:
        input_tokens: Tokens of the prompt.
        output_tokens: Tokens of the answer.
        total_tokens: Both.
        cost_usd: The cost in US dollars, when the provider's price is known.
        latency_ms: How long the call took, in milliseconds.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cost_usd: float | None = None
    latency_ms: float = 0.0

    def __add__(self, other: Usage) -> Usage:
        cost = None
        if self.cost_usd is not None or other.cost_usd is not None:
            cost = (self.cost_usd or 0.0) + (other.cost_usd or 0.0)
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
            cost_usd=cost,
            latency_ms=self.latency_ms + other.latency_ms,
        )


class LLMConfig(_Model):
    """How to call the model. ``model`` is a litellm model string, e.g. ``"openai/gpt-4o"``.

    ``extra`` is passed through to the provider call unchanged (``api_base``,
    ``api_key``, ``timeout``, ...).

    Attributes:
        model: A litellm model string; ``mock`` for a scripted model.
        temperature: The sampling temperature, or the provider's default.
        max_tokens: Tokens an answer may have at most, or the provider's default.
        strict_output: Ask for strict schema adherence of the ``__finish__`` call.
        tool_choice: ``auto``, ``required``, ``none`` or a tool's name.
        extra: Passed to the provider call unchanged.
    """

    model: str = "mock"
    temperature: float | None = None
    max_tokens: int | None = None
    strict_output: bool = False
    tool_choice: Literal["auto", "required", "none"] | str | None = None
    extra: dict[str, Any] = Field(default_factory=dict)


class ToolSpec(_Model):
    """What the model is told about one tool: name, description, JSON Schema of its input.

    Attributes:
        name: The tool's name.
        description: What the model is told the tool does.
        parameters: The JSON Schema of its input.
        strict: Ask the provider for strict schema adherence.
    """

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    strict: bool = False


# --- results of a run ------------------------------------------------------------------

class SessionStatus(str, Enum):
    """A session's (and a run's) status. A session with an ACTIVE status has a run in
    progress: executing, due to be recovered, or waiting for a person or a client.

    Attributes:
        ACTIVE: A run is executing (or due to be recovered).
        AWAITING_APPROVAL: A run waits for a person's decision on a call.
        AWAITING_CLIENT_TOOL: A run waits for a client's result of a call.
        COMPLETED: The last run completed.
        FAILED: The last run failed.
        INTERRUPTED: The last run stopped after a step when asked; it can be resumed.
        ABORTED: The last run's workflow was cancelled.
    """

    _value_: AgentStatus  # for a type checker: ``status.value`` is an AgentStatus
    ACTIVE = "active"
    AWAITING_APPROVAL = "awaiting_approval"
    AWAITING_CLIENT_TOOL = "awaiting_client_tool"
    COMPLETED = "completed"
    FAILED = "failed"
    INTERRUPTED = "interrupted"
    ABORTED = "aborted"

    def __str__(self) -> str:
        return self.value

    def __hash__(self) -> int:  # hash as the plain string, so "active" in ACTIVE_STATUSES
        return str.__hash__(self)

    @property
    def is_active(self) -> bool:
        return self in ACTIVE_STATUSES


ACTIVE_STATUSES: frozenset[SessionStatus] = frozenset(
    {SessionStatus.ACTIVE, SessionStatus.AWAITING_APPROVAL, SessionStatus.AWAITING_CLIENT_TOOL}
)
"""The statuses of a session with a run in progress; SQL's ``helix.active_statuses()`` is the same set."""

AgentStatus = Literal[
    "active",
    "completed",
    "failed",
    "interrupted",
    "aborted",
    "awaiting_approval",
    "awaiting_client_tool",
]
""":class:`SessionStatus` values as a ``Literal``, for pydantic fields."""


class AgentResult(_Model):
    """What a finished run returns: ``status`` plus ``output`` or ``error``.

    Attributes:
        session_id: The session.
        status: ``completed``, ``failed``, ``interrupted``, ``aborted``, or a waiting status.
        output: The agent's output: its text, or its structured output.
        error: Why the run failed.
        step_count: The session's committed steps.
    """

    session_id: str
    status: AgentStatus
    output: Any = None
    error: str | None = None
    step_count: int = 0
    stop_reason: str | None = None
    """A model stop reason (``end_turn``, ``tool_use``, ...) or how the run was ended
    (``max_steps``, ``interrupted``, ``aborted``)."""
    usage: Usage | None = None
    """The model usage of this run's steps, summed (its committed ``llm`` usage rows);
    None for a run that did not return (aborted, or refused before its first step)."""


class StepInfo(_Model):
    """One agent step as ``on_step_finish`` sees it::

        def on_step_finish(step: StepInfo, ctx: HookContext) -> None:
            print(step.step, step.step_type, step.type, len(step.tool_calls), step.usage.total_tokens)
            for result in step.tool_results:
                print(result.tool_name, "(error)" if result.is_error else "", result.content)
    """

    step: int
    """The session's step number (``ctx.step``)."""
    step_type: Literal["initial", "tool_result"]
    """``initial`` for the first step of a run, ``tool_result`` for a step that follows
    tool results."""
    type: Literal["text", "tool_calls", "structured_output", "error"]
    """What the model answered (the :data:`StepResult` kind)."""
    text: str = ""
    """The step's assistant text (often empty on a tool-calling step)."""
    reasoning: str | None = None
    """The model's reasoning, when it gave any this step."""
    tool_calls: list[ParsedToolCall] = Field(default_factory=list)
    """The calls this step made (sub-agent calls and ``__finish__`` included)."""
    tool_results: list[ToolResultMessage] = Field(default_factory=list)
    """Their results, in call order; ``is_error`` marks a tool that failed, got invalid
    arguments or was refused."""
    stop_reason: StopReason | None = None
    """Why the model stopped."""
    error: str | None = None
    """The model call's error, for an ``error`` step."""
    usage: Usage = Field(default_factory=Usage)
    """This step's model usage alone."""
    messages: list[Message] = Field(default_factory=list)
    """The messages this step appended: the assistant turn and the tool results."""
