"""The ``__finish__`` history invariant: persisted history never contains a
tool call without a matching tool result.

Eager heal, at the step that completes the agent: append the results of
:func:`synthesize_step_tool_results` right after the assistant message::

    >>> synthesize_finish_tool_result("tc1").content
    '{"acknowledged":true}'

Heal on reopen: when a session's history ends with a ``__finish__`` call that has no
result, :func:`heal_unpaired_finish` pairs it before the next run's input.
"""

from __future__ import annotations

from collections.abc import Sequence

from helix_dbos.types import FINISH_TOOL_NAME, AssistantMessage, Message, ToolResultMessage

from .messages import create_tool_result_message, unpaired_tool_call_ids
from .plans import StepProcessingPlan

FINISH_ACKNOWLEDGEMENT = {"acknowledged": True}
"""The result a ``__finish__`` call gets in the transcript: a sentinel, not the output."""


def synthesize_finish_tool_result(tool_call_id: str) -> ToolResultMessage:
    """The synthetic result pairing a ``__finish__`` call: a fixed sentinel, not the output.

    Args:
        tool_call_id: The ``__finish__`` call's id.

    Returns:
        The tool result message.
    """
    return create_tool_result_message(tool_call_id, FINISH_TOOL_NAME, FINISH_ACKNOWLEDGEMENT)


def synthesize_skipped_tool_result(tool_call_id: str, tool_name: str) -> ToolResultMessage:
    """The error result of a call that did not run because ``__finish__`` ended the step.

    Args:
        tool_call_id: The skipped call's id.
        tool_name: Its tool's name.

    Returns:
        The error result message.
    """
    return create_tool_result_message(
        tool_call_id,
        tool_name,
        success=False,
        error=f"Not executed: the task was completed by {FINISH_TOOL_NAME} in the same step.",
    )


def synthesize_step_tool_results(plan: StepProcessingPlan) -> list[ToolResultMessage]:
    """Every tool result the framework writes itself for a step, in tool-call order:
    the ``__finish__`` acknowledgement, the skipped calls beside it, and the errors of
    rejected ``__finish__`` calls. Results of executed tools come from the runtime.

    Args:
        plan: The step's plan, from :func:`plan_step_processing`.

    Returns:
        The results, in tool-call order.

    Examples:
        >>> from helix_dbos.types import ToolCallsStepResult, ParsedToolCall
        >>> from helix_dbos.orchestration.step_processing import plan_step_processing
        >>> plan = plan_step_processing(ToolCallsStepResult(tool_calls=[
        ...     ParsedToolCall(id="t1", name="search", arguments={}),
        ...     ParsedToolCall(id="t2", name="__finish__", arguments={"done": True}),
        ... ]))
        >>> [(m.tool_call_id, m.is_error) for m in synthesize_step_tool_results(plan)]
        [('t1', True), ('t2', False)]
    """
    results: dict[str, ToolResultMessage] = {}
    if plan.finish_tool_call_id is not None:
        results[plan.finish_tool_call_id] = synthesize_finish_tool_result(plan.finish_tool_call_id)
    for call in plan.skipped_tool_calls:
        results[call.id] = synthesize_skipped_tool_result(call.id, call.name)
    for rejected in plan.finish_errors:
        results[rejected.tool_call_id] = create_tool_result_message(
            rejected.tool_call_id, FINISH_TOOL_NAME, success=False, error=rejected.error
        )
    call_order = _call_order(plan)
    return sorted(results.values(), key=lambda message: call_order[message.tool_call_id])


def _call_order(plan: StepProcessingPlan) -> dict[str, int]:
    message_plan = plan.assistant_message_plan
    if message_plan is None:
        return {}
    ids = [call.id for call in message_plan.tool_calls]
    ids += [call.id for call in message_plan.sub_agent_calls]
    return {call_id: index for index, call_id in enumerate(ids)}


def find_unpaired_finish_call_id(messages: Sequence[Message]) -> str | None:
    """The id of the first ``__finish__`` call with no tool result, or ``None``.

    Args:
        messages: A transcript.

    Returns:
        The call's id, or None.
    """
    unpaired = set(unpaired_tool_call_ids(messages))
    for call_id in _finish_call_ids(messages):
        if call_id in unpaired:
            return call_id
    return None


def heal_unpaired_finish(messages: Sequence[Message]) -> list[Message]:
    """A copy of ``messages`` where every dangling ``__finish__`` call is paired.

    The synthetic result goes right after the assistant message's own tool results.
    A no-op (returning an equal copy) for histories written by current code.

    Args:
        messages: A transcript.

    Returns:
        The transcript with a result for every ``__finish__`` call.
    """
    unpaired = set(unpaired_tool_call_ids(messages)) & set(_finish_call_ids(messages))
    healed: list[Message] = []
    to_pair: list[str] = []
    for message in messages:
        if to_pair and not isinstance(message, ToolResultMessage):
            healed.extend(synthesize_finish_tool_result(call_id) for call_id in to_pair)
            to_pair = []
        healed.append(message)
        if isinstance(message, AssistantMessage):
            to_pair = [call.id for call in message.tool_calls if call.id in unpaired]
    healed.extend(synthesize_finish_tool_result(call_id) for call_id in to_pair)
    return healed


def _finish_call_ids(messages: Sequence[Message]) -> list[str]:
    return [
        call.id
        for message in messages
        if isinstance(message, AssistantMessage)
        for call in message.tool_calls
        if call.name == FINISH_TOOL_NAME
    ]
