"""plan_step_processing: every worked example, plus the __finish__ edge cases."""

import logging

import pytest
from pydantic import BaseModel

from helix_dbos.orchestration import (
    AssistantMessagePlan,
    FinishToolError,
    StatusUpdatePlan,
    StepProcessingPlan,
    plan_step_processing,
)
from helix_dbos.types import (
    ErrorStepResult,
    ParsedSubAgentCall,
    ParsedToolCall,
    StructuredOutputStepResult,
    TextStepResult,
    ThinkingContent,
    ToolCallsStepResult,
)


class ResultOutput(BaseModel):
    result: str


class Verdict(BaseModel):
    score: int
    note: str = "none"


# --- the processing flow's examples ------------------------------------------------


def test_seed_text_response():
    plan = plan_step_processing(TextStepResult(content="Hello!", should_stop=False))

    assert plan == StepProcessingPlan(
        assistant_message_plan=AssistantMessagePlan(content="Hello!", tool_calls=[]),
        pending_tool_calls=[],
        pending_sub_agent_calls=[],
        status_update=None,
        is_terminal=False,
    )


def test_seed_tool_calls():
    calls = [
        ParsedToolCall(id="tc1", name="search", arguments={"query": "test"}),
        ParsedToolCall(id="tc2", name="fetch", arguments={"url": "https://..."}),
    ]
    plan = plan_step_processing(ToolCallsStepResult(tool_calls=calls, sub_agent_calls=[]))

    assert plan.assistant_message_plan == AssistantMessagePlan(tool_calls=calls)
    assert [c.id for c in plan.pending_tool_calls] == ["tc1", "tc2"]
    assert [c.name for c in plan.pending_tool_calls] == ["search", "fetch"]
    assert plan.pending_sub_agent_calls == []
    assert plan.status_update is None
    assert plan.is_terminal is False


def test_seed_finish_tool_call():
    finish = ParsedToolCall(id="tc1", name="__finish__", arguments={"result": "done"})
    plan = plan_step_processing(
        ToolCallsStepResult(tool_calls=[finish], sub_agent_calls=[]), output_schema=ResultOutput
    )

    assert plan.assistant_message_plan == AssistantMessagePlan(tool_calls=[finish])
    assert plan.pending_tool_calls == []
    assert plan.pending_sub_agent_calls == []
    assert plan.status_update == StatusUpdatePlan(status="completed", output={"result": "done"})
    assert plan.is_terminal is True
    assert plan.output == {"result": "done"}
    assert plan.finish_tool_call_id == "tc1"
    assert plan.skipped_tool_calls == []
    assert plan.finish_errors == []


def test_seed_structured_output():
    plan = plan_step_processing(StructuredOutputStepResult(output={"result": "done"}))

    assert plan == StepProcessingPlan(
        assistant_message_plan=None,
        pending_tool_calls=[],
        pending_sub_agent_calls=[],
        status_update=StatusUpdatePlan(status="completed", output={"result": "done"}),
        is_terminal=True,
        output={"result": "done"},
    )


def test_seed_error():
    plan = plan_step_processing(ErrorStepResult(error="Rate limited", should_stop=True))

    assert plan == StepProcessingPlan(
        assistant_message_plan=None,
        pending_tool_calls=[],
        pending_sub_agent_calls=[],
        status_update=StatusUpdatePlan(status="failed", error="Rate limited"),
        is_terminal=True,
    )


# --- the edge cases -------------------------------------------------------------------


def test_seed_testing_detects_finish_tool():
    plan = plan_step_processing(
        ToolCallsStepResult(
            tool_calls=[ParsedToolCall(id="t1", name="__finish__", arguments={"done": True})],
            sub_agent_calls=[],
        )
    )

    assert plan.is_terminal is True
    assert len(plan.pending_tool_calls) == 0
    assert plan.output == {"done": True}


def test_seed_testing_excludes_finish_from_pending_tools():
    plan = plan_step_processing(
        ToolCallsStepResult(
            tool_calls=[
                ParsedToolCall(id="t1", name="search", arguments={}),
                ParsedToolCall(id="t2", name="__finish__", arguments={}),
            ],
            sub_agent_calls=[],
        )
    )

    assert len(plan.pending_tool_calls) == 0


# --- __finish__ beside other calls ----------------------------------------------------


def test_finish_beside_other_tools_is_terminal_and_skips_them():
    search = ParsedToolCall(id="t1", name="search", arguments={"q": "x"})
    finish = ParsedToolCall(id="t2", name="__finish__", arguments={"result": "ok"})
    child = ParsedSubAgentCall(id="s1", agent_type="summarizer", input={"text": "t"})
    plan = plan_step_processing(
        ToolCallsStepResult(tool_calls=[search, finish], sub_agent_calls=[child]),
        output_schema=ResultOutput,
    )

    assert plan.is_terminal is True
    assert plan.pending_tool_calls == []
    assert plan.pending_sub_agent_calls == []
    assert plan.output == {"result": "ok"}
    assert plan.status_update == StatusUpdatePlan(status="completed", output={"result": "ok"})
    # history keeps every call; the skipped ones are listed so they can be paired
    assert plan.assistant_message_plan.tool_calls == [search, finish]
    assert plan.assistant_message_plan.sub_agent_calls == [child]
    assert [(c.id, c.name) for c in plan.skipped_tool_calls] == [
        ("t1", "search"),
        ("s1", "subagent__summarizer"),
    ]


def test_finish_output_is_validated_and_normalized_by_schema():
    plan = plan_step_processing(
        ToolCallsStepResult(
            tool_calls=[ParsedToolCall(id="f", name="__finish__", arguments={"score": "7"})]
        ),
        output_schema=Verdict,
    )

    assert plan.output == {"score": 7, "note": "none"}


def test_invalid_finish_output_is_not_terminal_and_becomes_tool_error(caplog):
    caplog.set_level(logging.WARNING, logger="helix_dbos")
    search = ParsedToolCall(id="t1", name="search", arguments={})
    finish = ParsedToolCall(id="f1", name="__finish__", arguments={"result": 42})
    plan = plan_step_processing(
        ToolCallsStepResult(tool_calls=[search, finish]), output_schema=ResultOutput
    )

    assert plan.is_terminal is False
    assert plan.status_update is None
    assert plan.output is None
    assert plan.finish_tool_call_id is None
    assert plan.pending_tool_calls == [search]
    assert len(plan.finish_errors) == 1
    error = plan.finish_errors[0]
    assert error.tool_call_id == "f1"
    assert "result: Input should be a valid string" in error.error
    assert "__finish__" in error.error
    assert any("f1" in record.getMessage() for record in caplog.records)


def test_finish_with_unparseable_arguments_is_rejected_even_without_schema():
    finish = ParsedToolCall(
        id="f1", name="__finish__", arguments="{oops", parse_error="Expecting value"
    )
    plan = plan_step_processing(ToolCallsStepResult(tool_calls=[finish]))

    assert plan.is_terminal is False
    assert plan.finish_errors == [
        FinishToolError(tool_call_id="f1", error="Invalid __finish__ arguments: Expecting value")
    ]


def test_first_valid_finish_call_wins_and_rejected_ones_before_it_are_skipped():
    bad = ParsedToolCall(id="f1", name="__finish__", arguments={})
    good = ParsedToolCall(id="f2", name="__finish__", arguments={"result": "second"})
    late = ParsedToolCall(id="f3", name="__finish__", arguments={"result": "third"})
    plan = plan_step_processing(
        ToolCallsStepResult(tool_calls=[bad, good, late]), output_schema=ResultOutput
    )

    assert plan.is_terminal is True
    assert plan.output == {"result": "second"}
    assert plan.finish_tool_call_id == "f2"
    assert [c.id for c in plan.skipped_tool_calls] == ["f1", "f3"]
    assert plan.finish_errors == []


def test_finish_without_schema_passes_arguments_through():
    plan = plan_step_processing(
        ToolCallsStepResult(
            tool_calls=[ParsedToolCall(id="f", name="__finish__", arguments=["any", 1])]
        )
    )

    assert plan.output == ["any", 1]


# --- other step kinds -------------------------------------------------------------


def test_tool_calls_with_sub_agents_and_thinking():
    thinking = ThinkingContent(content="hmm", signature="sig")
    child = ParsedSubAgentCall(id="s1", agent_type="summarizer", input={"text": "a"})
    plan = plan_step_processing(
        ToolCallsStepResult(
            content="Working on it",
            tool_calls=[ParsedToolCall(id="t1", name="search", arguments={})],
            sub_agent_calls=[child],
            thinking=thinking,
            stop_reason="tool_use",
        )
    )

    assert plan.assistant_message_plan.content == "Working on it"
    assert plan.assistant_message_plan.thinking == thinking
    assert plan.pending_sub_agent_calls == [child]
    assert plan.stop_reason == "tool_use"
    assert plan.is_terminal is False


def test_text_keeps_thinking_and_stop_reason_and_is_never_terminal_itself():
    thinking = ThinkingContent(content="reasoning")
    plan = plan_step_processing(
        TextStepResult(content="Bye", thinking=thinking, should_stop=True, stop_reason="end_turn")
    )

    assert plan.assistant_message_plan == AssistantMessagePlan(content="Bye", thinking=thinking)
    assert plan.stop_reason == "end_turn"
    assert plan.is_terminal is False  # should_stop_execution decides (the third reason to stop)


def test_error_without_should_stop_is_not_terminal():
    plan = plan_step_processing(
        ErrorStepResult(error="Timeout", should_stop=False, stop_reason="error")
    )

    assert plan.assistant_message_plan is None
    assert plan.status_update is None
    assert plan.is_terminal is False
    assert plan.stop_reason == "error"


def test_structured_output_step_is_normalized_by_schema():
    plan = plan_step_processing(
        StructuredOutputStepResult(output={"score": 3}, stop_reason="end_turn"),
        output_schema=Verdict,
    )

    assert plan.output == {"score": 3, "note": "none"}
    assert plan.status_update.output == {"score": 3, "note": "none"}
    assert plan.stop_reason == "end_turn"


def test_nonconforming_structured_output_passes_through_with_warning(caplog):
    caplog.set_level(logging.WARNING, logger="helix_dbos")
    plan = plan_step_processing(StructuredOutputStepResult(output={"x": 1}), output_schema=Verdict)

    assert plan.is_terminal is True
    assert plan.output == {"x": 1}
    assert any("score: Field required" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    "step",
    [
        TextStepResult(content="x"),
        ToolCallsStepResult(tool_calls=[ParsedToolCall(id="a", name="b")]),
        StructuredOutputStepResult(output=1),
        ErrorStepResult(error="e"),
    ],
)
def test_plans_round_trip_json(step):
    plan = plan_step_processing(step)

    assert StepProcessingPlan.model_validate_json(plan.model_dump_json()) == plan
