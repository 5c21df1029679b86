"""Whether to stop, and how a run ends. A step with tool calls goes on
whatever stop reason the model gave::

    >>> from helix_dbos.types import TextStepResult
    >>> should_stop_execution(TextStepResult(content="hi"), 10, StopConfig(max_steps=10))
    True
    >>> determine_final_status(TextStepResult(content="hi", stop_reason="refusal"))
    'failed'
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from helix_dbos.types import (
    ErrorStepResult,
    StepResult,
    StopReason,
    StructuredOutputStepResult,
    TextStepResult,
    ToolCallsStepResult,
)

ERROR_STOP_REASONS: frozenset[StopReason] = frozenset(
    {"max_tokens", "content_filter", "refusal", "error", "unknown"}
)
"""Stop reasons that make a run fail."""

RECOVERABLE_ERROR_STOP_REASONS: frozenset[StopReason] = frozenset({"max_tokens"})
"""Error stop reasons an agent with an output schema retries (with a correction message)."""


@dataclass(frozen=True)
class StopConfig:
    """Limits checked by :func:`should_stop_execution`.

    ``stop_when`` is a predicate over the step result (sync). The agent's stop
    conditions over the loop state are compiled by ``compile_stop_conditions``.

    Attributes:
        max_steps: Steps a run may take at most.
        stop_when: A predicate over the step result, or None.
    """

    max_steps: int | None = None
    stop_when: Callable[[StepResult], bool] | None = None


def should_stop_execution(step_result: StepResult, step_count: int, config: StopConfig) -> bool:
    """Whether the agent stops after this step, checked in this order:
    structured output, error with ``should_stop``, text with ``should_stop``, max steps,
    custom ``stop_when``.

    Args:
        step_result: What the model answered.
        step_count: Steps so far, this one included.
        config: The limits.

    Returns:
        True when the agent stops.
    """
    if isinstance(step_result, StructuredOutputStepResult):
        return True
    if isinstance(step_result, (ErrorStepResult, TextStepResult)) and step_result.should_stop:
        return True
    if config.max_steps is not None and step_count >= config.max_steps:
        return True
    return config.stop_when is not None and bool(config.stop_when(step_result))


def is_error_stop_reason(stop_reason: StopReason | None) -> bool:
    """Whether ``stop_reason`` makes a run fail (``max_tokens``, ``content_filter``,
    ``refusal``, ``error``, ``unknown``).

    Args:
        stop_reason: Why the model stopped, or None.

    Returns:
        True for a reason that fails the run.
    """
    return stop_reason in ERROR_STOP_REASONS


def is_recoverable_error_stop_reason(stop_reason: StopReason | None) -> bool:
    """Whether an agent with an output schema should retry instead of failing: only
    ``max_tokens``. See ``max_tokens_recovery_message``.

    Args:
        stop_reason: Why the model stopped, or None.

    Returns:
        True for ``max_tokens``.

    Examples:
        >>> is_recoverable_error_stop_reason("max_tokens"), is_recoverable_error_stop_reason("refusal")
        (True, False)
    """
    return stop_reason in RECOVERABLE_ERROR_STOP_REASONS


def determine_final_status(step_result: StepResult) -> Literal["completed", "failed"]:
    """``failed`` for an error step or an error stop reason, else ``completed``.

    Args:
        step_result: The run's last step result.

    Returns:
        ``completed`` or ``failed``.
    """
    if isinstance(step_result, ErrorStepResult) or is_error_stop_reason(step_result.stop_reason):
        return "failed"
    return "completed"


def should_continue(step_result: StepResult) -> bool:
    """Whether the loop runs another turn: exactly when the step made tool (or sub-agent)
    calls, whatever its finish reason says (some models report ``end_turn`` while a tool
    call is pending).

    Args:
        step_result: What the model answered.

    Returns:
        True when the step made calls.

    Examples:
        >>> from helix_dbos.types import ParsedToolCall
        >>> should_continue(ToolCallsStepResult(
        ...     tool_calls=[ParsedToolCall(id="t1", name="search")], stop_reason="end_turn"))
        True
    """
    return isinstance(step_result, ToolCallsStepResult) and bool(
        step_result.tool_calls or step_result.sub_agent_calls
    )
