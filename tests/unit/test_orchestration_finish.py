"""The __finish__ history invariant: eager heal at completion and legacy heal on reopen."""

from pydantic import BaseModel

from helix_dbos.orchestration import (
    create_assistant_message,
    create_tool_result_message,
    find_unpaired_finish_call_id,
    heal_unpaired_finish,
    plan_step_processing,
    synthesize_finish_tool_result,
    synthesize_step_tool_results,
    unpaired_tool_call_ids,
)
from helix_dbos.types import (
    AssistantMessage,
    MessageListAdapter,
    ParsedSubAgentCall,
    ParsedToolCall,
    ToolCallsStepResult,
    ToolResultMessage,
    UserMessage,
)


class ResultOutput(BaseModel):
    result: str


def test_synthesized_finish_result_is_the_fixed_sentinel():
    assert synthesize_finish_tool_result("tc1") == ToolResultMessage(
        tool_call_id="tc1", tool_name="__finish__", content='{"acknowledged":true}', is_error=False
    )


def test_seed_committed_history_after_finish():
    """The assistant message with the __finish__ call, then its synthetic result."""
    prior = [UserMessage(content="Analyze this")]
    plan = plan_step_processing(
        ToolCallsStepResult(
            tool_calls=[ParsedToolCall(id="tc1", name="__finish__", arguments={"result": "done"})]
        ),
        output_schema=ResultOutput,
    )
    history = [
        *prior,
        create_assistant_message(plan.assistant_message_plan),
        *synthesize_step_tool_results(plan),
    ]

    assert MessageListAdapter.dump_python(history[1:], mode="json") == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "tc1",
                    "name": "__finish__",
                    "arguments": {"result": "done"},
                    "parse_error": None,
                }
            ],
            "thinking": None,
        },
        {
            "role": "tool",
            "tool_call_id": "tc1",
            "tool_name": "__finish__",
            "content": '{"acknowledged":true}',
            "is_error": False,
        },
    ]
    assert unpaired_tool_call_ids(history) == []


def test_step_results_pair_skipped_calls_beside_finish_in_call_order():
    plan = plan_step_processing(
        ToolCallsStepResult(
            tool_calls=[
                ParsedToolCall(id="t1", name="search", arguments={}),
                ParsedToolCall(id="f", name="__finish__", arguments={"result": "r"}),
                ParsedToolCall(id="t2", name="fetch", arguments={}),
            ],
            sub_agent_calls=[ParsedSubAgentCall(id="s1", agent_type="helper", input={})],
        ),
        output_schema=ResultOutput,
    )
    results = synthesize_step_tool_results(plan)

    assert [(r.tool_call_id, r.tool_name, r.is_error) for r in results] == [
        ("t1", "search", True),
        ("f", "__finish__", False),
        ("t2", "fetch", True),
        ("s1", "subagent__helper", True),
    ]
    assert "Not executed" in results[0].content
    history = [create_assistant_message(plan.assistant_message_plan), *results]
    assert unpaired_tool_call_ids(history) == []


def test_step_results_carry_finish_validation_errors():
    plan = plan_step_processing(
        ToolCallsStepResult(
            tool_calls=[
                ParsedToolCall(id="t1", name="search", arguments={}),
                ParsedToolCall(id="f", name="__finish__", arguments={"wrong": 1}),
            ]
        ),
        output_schema=ResultOutput,
    )
    results = synthesize_step_tool_results(plan)

    assert len(results) == 1
    assert results[0].tool_call_id == "f"
    assert results[0].is_error is True
    assert "result: Field required" in results[0].content
    # the search call is pending: the runtime runs it and appends its result
    assert [c.id for c in plan.pending_tool_calls] == ["t1"]


def test_no_synthesized_results_for_ordinary_steps():
    plan = plan_step_processing(ToolCallsStepResult(tool_calls=[ParsedToolCall(id="t", name="s")]))

    assert synthesize_step_tool_results(plan) == []


# --- legacy heal on continuation reopen ------------------------------------------------


def legacy_history():
    return [
        UserMessage(content="go"),
        AssistantMessage(
            tool_calls=[
                ParsedToolCall(id="t1", name="search"),
                ParsedToolCall(id="f1", name="__finish__", arguments={"a": 1}),
            ]
        ),
        create_tool_result_message("t1", "search", {"hits": 1}),
        UserMessage(content="and now?"),
    ]


def test_find_unpaired_finish_call_id():
    assert find_unpaired_finish_call_id(legacy_history()) == "f1"


def test_find_ignores_paired_finish_and_other_unpaired_calls():
    paired = [
        AssistantMessage(tool_calls=[ParsedToolCall(id="f1", name="__finish__")]),
        synthesize_finish_tool_result("f1"),
        AssistantMessage(tool_calls=[ParsedToolCall(id="x", name="search")]),
    ]

    assert find_unpaired_finish_call_id(paired) is None
    assert find_unpaired_finish_call_id([]) is None


def test_legacy_heal_inserts_result_after_the_assistant_turns_results():
    original = legacy_history()
    healed = heal_unpaired_finish(original)

    assert healed == [
        original[0],
        original[1],
        original[2],
        synthesize_finish_tool_result("f1"),
        original[3],
    ]
    assert original == legacy_history()  # input untouched
    assert find_unpaired_finish_call_id(healed) is None


def test_legacy_heal_at_end_of_history_and_for_several_turns():
    history = [
        AssistantMessage(tool_calls=[ParsedToolCall(id="f1", name="__finish__")]),
        AssistantMessage(tool_calls=[ParsedToolCall(id="f2", name="__finish__")]),
    ]

    assert heal_unpaired_finish(history) == [
        history[0],
        synthesize_finish_tool_result("f1"),
        history[1],
        synthesize_finish_tool_result("f2"),
    ]


def test_legacy_heal_is_a_no_op_for_current_histories():
    current = [
        AssistantMessage(tool_calls=[ParsedToolCall(id="f1", name="__finish__")]),
        synthesize_finish_tool_result("f1"),
    ]

    healed = heal_unpaired_finish(current)
    assert healed == current
    assert healed is not current
