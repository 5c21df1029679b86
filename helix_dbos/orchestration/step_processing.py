"""Plan what to do with one LLM step result.

The plan is pure data; the runtime applies it::

    >>> from helix_dbos.types import ToolCallsStepResult, ParsedToolCall
    >>> plan = plan_step_processing(ToolCallsStepResult(tool_calls=[
    ...     ParsedToolCall(id="tc1", name="search", arguments={"query": "test"}),
    ... ]))
    >>> [call.name for call in plan.pending_tool_calls], plan.is_terminal
    (['search'], False)

``__finish__`` is special: it is never executed. A valid ``__finish__`` call ends the
turn (terminal, ``output`` set, every other call in that step skipped); an invalid one
does not end it — the plan carries a tool error for it in ``finish_errors`` so the model
can correct itself. :func:`helix_dbos.orchestration.finish.synthesize_step_tool_results`
turns those, the finish acknowledgement and the skipped calls into tool result messages,
so the transcript never holds a tool call without its result.
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import BaseModel, ValidationError

from helix_dbos.types import (
    FINISH_TOOL_NAME,
    ErrorStepResult,
    ParsedToolCall,
    StepResult,
    StructuredOutputStepResult,
    TextStepResult,
    ToolCallsStepResult,
)

from .messages import sub_agent_call_as_tool_call
from .plans import AssistantMessagePlan, FinishToolError, StatusUpdatePlan, StepProcessingPlan
from .validation import conform_output, format_validation_error, validate_output

logger = logging.getLogger("helix_dbos")


def plan_step_processing(
    step_result: StepResult, output_schema: type[BaseModel] | None = None
) -> StepProcessingPlan:
    """Analyse one step result and plan the next actions.

    ``output_schema`` validates ``__finish__`` arguments (and, best effort, native
    structured output). Without it, ``__finish__`` arguments are the output as given.

    Args:
        step_result: What the model answered.
        output_schema: The agent's output schema, or None.

    Returns:
        The plan: the assistant message, the calls to run, the status update.
    """
    if isinstance(step_result, TextStepResult):
        return _plan_text(step_result)
    if isinstance(step_result, ToolCallsStepResult):
        return _plan_tool_calls(step_result, output_schema)
    if isinstance(step_result, StructuredOutputStepResult):
        return _plan_structured_output(step_result, output_schema)
    return _plan_error(step_result)


def _plan_text(step_result: TextStepResult) -> StepProcessingPlan:
    return StepProcessingPlan(
        assistant_message_plan=AssistantMessagePlan(
            content=step_result.content, thinking=step_result.thinking
        ),
        stop_reason=step_result.stop_reason,
    )


def _plan_structured_output(
    step_result: StructuredOutputStepResult, output_schema: type[BaseModel] | None
) -> StepProcessingPlan:
    output = conform_output(step_result.output, output_schema, source="Structured")
    return StepProcessingPlan(
        assistant_message_plan=None,
        status_update=StatusUpdatePlan(status="completed", output=output),
        is_terminal=True,
        output=output,
        stop_reason=step_result.stop_reason,
    )


def _plan_error(step_result: ErrorStepResult) -> StepProcessingPlan:
    status_update = None
    if step_result.should_stop:
        status_update = StatusUpdatePlan(status="failed", error=step_result.error)
    return StepProcessingPlan(
        assistant_message_plan=None,
        status_update=status_update,
        is_terminal=step_result.should_stop,
        stop_reason=step_result.stop_reason,
    )


def _plan_tool_calls(
    step_result: ToolCallsStepResult, output_schema: type[BaseModel] | None
) -> StepProcessingPlan:
    assistant_plan = AssistantMessagePlan(
        content=step_result.content,
        tool_calls=step_result.tool_calls,
        sub_agent_calls=step_result.sub_agent_calls,
        thinking=step_result.thinking,
    )
    finish_calls = [call for call in step_result.tool_calls if call.name == FINISH_TOOL_NAME]
    other_calls = [call for call in step_result.tool_calls if call.name != FINISH_TOOL_NAME]

    errors: list[FinishToolError] = []
    for finish_call in finish_calls:
        output, error = _finish_output(finish_call, output_schema)
        if error is not None:
            logger.warning("Rejected %s call %s:\n%s", FINISH_TOOL_NAME, finish_call.id, error)
            errors.append(FinishToolError(tool_call_id=finish_call.id, error=error))
            continue
        skipped = [call for call in step_result.tool_calls if call.id != finish_call.id]
        skipped += [sub_agent_call_as_tool_call(call) for call in step_result.sub_agent_calls]
        return StepProcessingPlan(
            assistant_message_plan=assistant_plan,
            status_update=StatusUpdatePlan(status="completed", output=output),
            is_terminal=True,
            output=output,
            stop_reason=step_result.stop_reason,
            finish_tool_call_id=finish_call.id,
            skipped_tool_calls=skipped,
        )

    return StepProcessingPlan(
        assistant_message_plan=assistant_plan,
        pending_tool_calls=other_calls,
        pending_sub_agent_calls=step_result.sub_agent_calls,
        stop_reason=step_result.stop_reason,
        finish_errors=errors,
    )


def _finish_output(
    call: ParsedToolCall, output_schema: type[BaseModel] | None
) -> tuple[Any, str | None]:
    """``(output, None)`` for acceptable ``__finish__`` arguments, else ``(None, error text)``."""
    if call.parse_error is not None:
        return None, f"Invalid {FINISH_TOOL_NAME} arguments: {call.parse_error}"
    if output_schema is None:
        return call.arguments, None
    try:
        return validate_output(call.arguments, output_schema), None
    except ValidationError as error:
        return None, (
            f"Invalid output for {FINISH_TOOL_NAME}:\n{format_validation_error(error)}\n"
            f"Fix the arguments and call {FINISH_TOOL_NAME} again."
        )
