"""Pure step-processing functions: no I/O, no DBOS, no database.

The runtime drives one agent step with them::

    plan = plan_step_processing(step_result, output_schema=agent.output_schema)
    if plan.assistant_message_plan:
        messages.append(create_assistant_message(plan.assistant_message_plan))
        messages.extend(synthesize_step_tool_results(plan))  # __finish__ ack, skipped, errors
    ...run plan.pending_tool_calls, append create_tool_result_message(...) for each...
"""

from .finish import (
    FINISH_ACKNOWLEDGEMENT,
    find_unpaired_finish_call_id,
    heal_unpaired_finish,
    synthesize_finish_tool_result,
    synthesize_skipped_tool_result,
    synthesize_step_tool_results,
)
from .finish_with import FinishWithResolution, ToolCallOutcome, resolve_finish_with
from .messages import (
    build_messages_for_llm,
    create_assistant_message,
    create_sub_agent_result_message,
    create_tool_result_message,
    json_stringify,
    sub_agent_call_as_tool_call,
    unpaired_tool_call_ids,
)
from .plans import AssistantMessagePlan, FinishToolError, StatusUpdatePlan, StepProcessingPlan
from .prompts import (
    SystemPrompt,
    max_tokens_recovery_message,
    output_requirement_section,
    resolve_system_prompt,
    with_output_requirement,
)
from .runaway_guard import MAX_SAME_TOOL_ERRORS, RunawayGuard
from .step_processing import plan_step_processing
from .stop_conditions import (
    StopCondition,
    StopInfo,
    as_stop_condition_list,
    compile_stop_conditions,
    cost_exceeds,
    has_tool_call,
    step_count_is,
    total_tokens_exceed,
)
from .stopping import (
    ERROR_STOP_REASONS,
    RECOVERABLE_ERROR_STOP_REASONS,
    StopConfig,
    determine_final_status,
    is_error_stop_reason,
    is_recoverable_error_stop_reason,
    should_continue,
    should_stop_execution,
)
from .validation import conform_output, format_validation_error, to_json_value, validate_output

__all__ = [
    "ERROR_STOP_REASONS",
    "FINISH_ACKNOWLEDGEMENT",
    "MAX_SAME_TOOL_ERRORS",
    "RECOVERABLE_ERROR_STOP_REASONS",
    "AssistantMessagePlan",
    "FinishToolError",
    "FinishWithResolution",
    "RunawayGuard",
    "StatusUpdatePlan",
    "StepProcessingPlan",
    "StopCondition",
    "StopConfig",
    "StopInfo",
    "SystemPrompt",
    "ToolCallOutcome",
    "as_stop_condition_list",
    "build_messages_for_llm",
    "compile_stop_conditions",
    "conform_output",
    "cost_exceeds",
    "create_assistant_message",
    "create_sub_agent_result_message",
    "create_tool_result_message",
    "determine_final_status",
    "find_unpaired_finish_call_id",
    "format_validation_error",
    "has_tool_call",
    "heal_unpaired_finish",
    "is_error_stop_reason",
    "is_recoverable_error_stop_reason",
    "json_stringify",
    "max_tokens_recovery_message",
    "output_requirement_section",
    "plan_step_processing",
    "resolve_finish_with",
    "resolve_system_prompt",
    "should_continue",
    "should_stop_execution",
    "step_count_is",
    "sub_agent_call_as_tool_call",
    "synthesize_finish_tool_result",
    "synthesize_skipped_tool_result",
    "synthesize_step_tool_results",
    "to_json_value",
    "total_tokens_exceed",
    "unpaired_tool_call_ids",
    "validate_output",
    "with_output_requirement",
]
