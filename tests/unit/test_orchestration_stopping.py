"""should_stop_execution, determine_final_status, recoverable stop reasons, should_continue."""

import typing

import pytest

from helix_dbos.orchestration import (
    StopConfig,
    determine_final_status,
    is_error_stop_reason,
    is_recoverable_error_stop_reason,
    should_continue,
    should_stop_execution,
)
from helix_dbos.types import (
    ErrorStepResult,
    ParsedSubAgentCall,
    ParsedToolCall,
    StopReason,
    StructuredOutputStepResult,
    TextStepResult,
    ToolCallsStepResult,
)

TOOL_STEP = ToolCallsStepResult(tool_calls=[ParsedToolCall(id="t1", name="search")])


# --- should_stop_execution, in the seed's priority order ------------------------------


def test_seed_example_stop_when_content_includes_done():
    config = StopConfig(
        max_steps=10,
        stop_when=lambda result: result.type == "text" and "DONE" in result.content,
    )

    assert should_stop_execution(TextStepResult(content="all DONE"), 1, config) is True
    assert should_stop_execution(TextStepResult(content="still going"), 1, config) is False


def test_structured_output_stops_even_below_max_steps():
    assert should_stop_execution(StructuredOutputStepResult(output={}), 1, StopConfig(max_steps=10))


def test_error_stops_only_with_should_stop():
    config = StopConfig(max_steps=10)

    assert should_stop_execution(ErrorStepResult(error="x", should_stop=True), 1, config) is True
    assert should_stop_execution(ErrorStepResult(error="x", should_stop=False), 1, config) is False


def test_text_stops_only_with_should_stop():
    config = StopConfig(max_steps=10)

    assert should_stop_execution(TextStepResult(content="x", should_stop=True), 1, config) is True
    assert should_stop_execution(TextStepResult(content="x", should_stop=False), 1, config) is False


def test_max_steps_is_a_safety_limit():
    config = StopConfig(max_steps=3)

    assert should_stop_execution(TOOL_STEP, 2, config) is False
    assert should_stop_execution(TOOL_STEP, 3, config) is True
    assert should_stop_execution(TOOL_STEP, 4, config) is True


def test_no_limits_never_stops_a_tool_step():
    assert should_stop_execution(TOOL_STEP, 1000, StopConfig()) is False


def test_stop_when_is_consulted_last():
    seen = []

    def stop_when(result):
        seen.append(result)
        return True

    config = StopConfig(max_steps=2, stop_when=stop_when)
    # higher-priority conditions short-circuit before stop_when runs
    assert should_stop_execution(StructuredOutputStepResult(output=1), 1, config)
    assert should_stop_execution(TOOL_STEP, 2, config)
    assert seen == []
    assert should_stop_execution(TOOL_STEP, 1, config)
    assert seen == [TOOL_STEP]


# --- determine_final_status -------------------------------------------------------------

SEED_STATUS = {
    "max_tokens": "failed",
    "content_filter": "failed",
    "refusal": "failed",
    "error": "failed",
    "unknown": "failed",
    "end_turn": "completed",
    "stop_sequence": "completed",
    "tool_use": "completed",
}


def test_every_stop_reason_is_mapped():
    assert set(SEED_STATUS) == set(typing.get_args(StopReason))


@pytest.mark.parametrize(("reason", "status"), sorted(SEED_STATUS.items()))
def test_stop_reason_maps_to_final_status(reason, status):
    assert determine_final_status(TextStepResult(content="x", stop_reason=reason)) == status
    assert determine_final_status(TOOL_STEP.model_copy(update={"stop_reason": reason})) == status
    assert is_error_stop_reason(reason) is (status == "failed")


def test_error_step_always_fails_and_missing_reason_completes():
    assert determine_final_status(ErrorStepResult(error="boom", stop_reason=None)) == "failed"
    assert determine_final_status(TextStepResult(content="x")) == "completed"
    assert determine_final_status(StructuredOutputStepResult(output={})) == "completed"


@pytest.mark.parametrize("reason", sorted(SEED_STATUS))
def test_only_max_tokens_is_recoverable(reason):
    assert is_recoverable_error_stop_reason(reason) is (reason == "max_tokens")


def test_no_stop_reason_is_not_recoverable():
    assert is_recoverable_error_stop_reason(None) is False


# --- should_continue: tool-call presence, not finish reason -------------------------


@pytest.mark.parametrize("reason", [None, "end_turn", "stop_sequence", "tool_use"])
def test_continues_while_tool_calls_exist_whatever_the_finish_reason(reason):
    assert should_continue(TOOL_STEP.model_copy(update={"stop_reason": reason})) is True


def test_continues_for_sub_agent_calls_only():
    step = ToolCallsStepResult(sub_agent_calls=[ParsedSubAgentCall(id="s", agent_type="a")])

    assert should_continue(step) is True


@pytest.mark.parametrize(
    "step",
    [
        TextStepResult(content="done", stop_reason="tool_use"),
        ToolCallsStepResult(tool_calls=[], stop_reason="tool_use"),
        StructuredOutputStepResult(output={}),
        ErrorStepResult(error="x"),
    ],
)
def test_stops_without_tool_calls(step):
    assert should_continue(step) is False
