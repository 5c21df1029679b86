"""The data a step plan is made of.

Plans are pydantic models, so the runtime can return them from a DBOS step and store
them as JSON::

    >>> plan = StepProcessingPlan(assistant_message_plan=None, is_terminal=True)
    >>> StepProcessingPlan.model_validate_json(plan.model_dump_json()) == plan
    True
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from helix_dbos.types import ParsedSubAgentCall, ParsedToolCall, StopReason, ThinkingContent


class _Plan(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AssistantMessagePlan(_Plan):
    """What the assistant message of a step holds (see ``create_assistant_message``).

    Attributes:
        content: The model's text, or None.
        tool_calls: The tool calls.
        sub_agent_calls: The sub-agent calls, stored after the tool calls.
        thinking: The model's reasoning, or None.
    """

    content: str | None = None
    tool_calls: list[ParsedToolCall] = Field(default_factory=list)
    sub_agent_calls: list[ParsedSubAgentCall] = Field(default_factory=list)
    thinking: ThinkingContent | None = None


class StatusUpdatePlan(_Plan):
    """A session status change: ``completed`` with ``output`` or ``failed`` with ``error``.

    Attributes:
        status: ``completed`` or ``failed``.
        output: The agent's output, when completed.
        error: Why, when failed.
    """

    status: Literal["completed", "failed"]
    output: Any = None
    error: str | None = None


class FinishToolError(_Plan):
    """A rejected ``__finish__`` call; ``error`` is fed back to the model as its tool result.

    Attributes:
        tool_call_id: The rejected call's id.
        error: What was wrong with its output.
    """

    tool_call_id: str
    error: str


class StepProcessingPlan(_Plan):
    """Everything the runtime needs to apply one step. Besides the
    assistant message to append and the calls to run:

    - ``finish_tool_call_id``: the ``__finish__`` call that completed the agent; the runtime
      appends its synthetic ``{"acknowledged":true}`` result.
    - ``skipped_tool_calls``: calls made beside a successful ``__finish__`` that will not
      run (sub-agent calls in their stored ``subagent__<type>`` form); each still needs a
      result.
    - ``finish_errors``: rejected ``__finish__`` calls (invalid output); not terminal.

    Attributes:
        assistant_message_plan: The assistant message to append, or None.
        pending_tool_calls: The tool calls to run, in call order.
        pending_sub_agent_calls: The sub-agent calls to run, in call order.
        status_update: The session's new status, when the step ends the run.
        is_terminal: The step ends the run.
        output: The agent's output, when the step completes it.
        stop_reason: Why the model stopped.
        finish_tool_call_id: The ``__finish__`` call that completed the agent, or None.
        skipped_tool_calls: Calls beside a successful ``__finish__`` that will not run.
        finish_errors: Rejected ``__finish__`` calls.
    """

    assistant_message_plan: AssistantMessagePlan | None
    pending_tool_calls: list[ParsedToolCall] = Field(default_factory=list)
    pending_sub_agent_calls: list[ParsedSubAgentCall] = Field(default_factory=list)
    status_update: StatusUpdatePlan | None = None
    is_terminal: bool = False
    output: Any = None
    stop_reason: StopReason | None = None
    finish_tool_call_id: str | None = None
    skipped_tool_calls: list[ParsedToolCall] = Field(default_factory=list)
    finish_errors: list[FinishToolError] = Field(default_factory=list)
