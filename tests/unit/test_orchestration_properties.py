"""Hypothesis properties: the transcript invariant and JSON round trips of every type."""

import typing

from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from helix_dbos.orchestration import (
    FinishToolError,
    FinishWithResolution,
    RunawayGuard,
    StatusUpdatePlan,
    StepProcessingPlan,
    create_assistant_message,
    create_sub_agent_result_message,
    create_tool_result_message,
    find_unpaired_finish_call_id,
    heal_unpaired_finish,
    plan_step_processing,
    synthesize_step_tool_results,
    unpaired_tool_call_ids,
)
from helix_dbos.orchestration.plans import AssistantMessagePlan
from helix_dbos.tools import ToolEvent
from helix_dbos.types import (
    AgentResult,
    AgentStatus,
    AssistantMessage,
    ErrorStepResult,
    LLMConfig,
    MessageListAdapter,
    ParsedSubAgentCall,
    ParsedToolCall,
    StepResultAdapter,
    StopReason,
    StructuredOutputStepResult,
    SystemMessage,
    TextStepResult,
    ThinkingContent,
    ToolCallsStepResult,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
)

# --- strategies ------------------------------------------------------------------------

text = st.text(max_size=20)
ids = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=8)
finite = st.floats(allow_nan=False, allow_infinity=False)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | finite | text,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(text, children, max_size=3),
    max_leaves=8,
)
stop_reasons = st.none() | st.sampled_from(typing.get_args(StopReason))
tool_names = st.sampled_from(["search", "fetch", "__finish__", "submit"])
thinking = st.none() | st.builds(ThinkingContent, content=text, signature=st.none() | text)
usage = st.builds(
    Usage,
    input_tokens=st.integers(0, 10**9),
    output_tokens=st.integers(0, 10**9),
    total_tokens=st.integers(0, 10**9),
    cost_usd=st.none() | finite,
    latency_ms=finite,
)


class Answer(BaseModel):
    result: str


def parsed_tool_call(call_id: str):
    return st.builds(
        ParsedToolCall,
        id=st.just(call_id),
        name=tool_names,
        arguments=json_values | st.fixed_dictionaries({"result": text}),
        parse_error=st.none() | st.none() | text,
    )


@st.composite
def tool_calls_steps(draw) -> ToolCallsStepResult:
    call_ids = draw(st.lists(ids, unique=True, max_size=6))
    split = draw(st.integers(0, len(call_ids)))
    return ToolCallsStepResult(
        content=draw(st.none() | text),
        tool_calls=[draw(parsed_tool_call(call_id)) for call_id in call_ids[:split]],
        sub_agent_calls=[
            ParsedSubAgentCall(
                id=call_id,
                agent_type=draw(st.sampled_from(["helper", "critic"])),
                input=draw(json_values),
            )
            for call_id in call_ids[split:]
        ],
        thinking=draw(thinking),
        stop_reason=draw(stop_reasons),
    )


step_results = st.one_of(
    st.builds(
        TextStepResult,
        content=text,
        thinking=thinking,
        should_stop=st.booleans(),
        stop_reason=stop_reasons,
    ),
    tool_calls_steps(),
    st.builds(StructuredOutputStepResult, output=json_values, stop_reason=stop_reasons),
    st.builds(
        ErrorStepResult,
        error=text,
        error_type=st.none() | text,
        should_stop=st.booleans(),
        stop_reason=stop_reasons,
    ),
)

messages = st.one_of(
    st.builds(SystemMessage, content=text),
    st.builds(UserMessage, content=text),
    st.builds(
        AssistantMessage,
        content=st.none() | text,
        tool_calls=st.lists(ids.flatmap(parsed_tool_call), max_size=3),
        thinking=thinking,
    ),
    st.builds(
        ToolResultMessage, tool_call_id=ids, tool_name=text, content=text, is_error=st.booleans()
    ),
)


# --- the transcript invariant ------------------------------------------------------------


@given(
    step=tool_calls_steps(),
    use_schema=st.booleans(),
    outcomes=st.lists(st.booleans(), min_size=6, max_size=6),
)
def test_every_tool_call_gets_exactly_one_result(step, use_schema, outcomes):
    """Whatever the model asks for, assistant message + synthesized results + one result
    per executed call leaves no tool call unanswered and none answered twice."""
    plan = plan_step_processing(step, output_schema=Answer if use_schema else None)
    history = [
        create_assistant_message(plan.assistant_message_plan),
        *synthesize_step_tool_results(plan),
    ]
    for call, ok in zip(plan.pending_tool_calls, outcomes, strict=False):
        history.append(
            create_tool_result_message(call.id, call.name, {"ok": True}, success=ok, error="failed")
        )
    for call, ok in zip(plan.pending_sub_agent_calls, reversed(outcomes), strict=False):
        history.append(
            create_sub_agent_result_message(
                call.id, call.agent_type, {"done": 1}, success=ok, error="x"
            )
        )

    assert unpaired_tool_call_ids(history) == []
    results = [m for m in history if isinstance(m, ToolResultMessage)]
    calls = {call.id: call.name for call in history[0].tool_calls}
    assert sorted(r.tool_call_id for r in results) == sorted(calls)
    assert all(calls[r.tool_call_id] == r.tool_name for r in results)


@given(step=tool_calls_steps())
def test_finish_plans_are_terminal_exactly_when_a_finish_call_was_accepted(step):
    plan = plan_step_processing(step, output_schema=Answer)

    assert plan.is_terminal == (plan.finish_tool_call_id is not None)
    if plan.is_terminal:
        assert plan.pending_tool_calls == [] and plan.pending_sub_agent_calls == []
        assert Answer.model_validate(plan.output)
    else:
        assert all(call.name != "__finish__" for call in plan.pending_tool_calls)


@st.composite
def legacy_histories(draw) -> list:
    """Histories in which every call is answered except, possibly, __finish__ calls."""
    history: list = []
    used: set[str] = set()
    for _ in range(draw(st.integers(0, 4))):
        history.append(UserMessage(content=draw(text)))
        call_ids = draw(st.lists(ids.filter(lambda i: i not in used), unique=True, max_size=3))
        used.update(call_ids)
        calls = [draw(parsed_tool_call(call_id)) for call_id in call_ids]
        history.append(AssistantMessage(tool_calls=calls))
        for call in calls:
            if call.name != "__finish__" or draw(st.booleans()):
                history.append(create_tool_result_message(call.id, call.name, draw(json_values)))
    return history


@given(history=legacy_histories())
def test_legacy_heal_pairs_every_finish_and_changes_nothing_else(history):
    healed = heal_unpaired_finish(history)

    assert find_unpaired_finish_call_id(healed) is None
    assert unpaired_tool_call_ids(healed) == []
    added = [m for m in healed if m not in history]
    assert all(m.tool_name == "__finish__" and m.content == '{"acknowledged":true}' for m in added)
    assert [m for m in healed if m not in added] == history
    assert heal_unpaired_finish(healed) == healed


# --- JSON round trips ----------------------------------------------------------------------


def round_trips(model: BaseModel) -> bool:
    return type(model).model_validate_json(model.model_dump_json()) == model


@given(step=step_results)
def test_step_results_and_their_plans_round_trip(step):
    assert StepResultAdapter.validate_json(StepResultAdapter.dump_json(step)) == step
    assert round_trips(plan_step_processing(step))
    assert round_trips(plan_step_processing(step, output_schema=Answer))


@given(history=st.lists(messages, max_size=5))
def test_messages_round_trip(history):
    assert MessageListAdapter.validate_json(MessageListAdapter.dump_json(history)) == history


@given(
    model=st.one_of(
        usage,
        thinking.filter(lambda t: t is not None),
        ids.flatmap(parsed_tool_call),
        st.builds(ParsedSubAgentCall, id=ids, agent_type=text, input=json_values),
        st.builds(
            LLMConfig,
            model=text,
            temperature=st.none() | finite,
            max_tokens=st.none() | st.integers(1, 10**6),
            strict_output=st.booleans(),
            tool_choice=st.none() | st.sampled_from(["auto", "required", "none"]) | text,
            extra=st.dictionaries(text, json_values, max_size=3),
        ),
        st.builds(
            ToolSpec,
            name=text,
            description=text,
            parameters=st.dictionaries(text, json_values, max_size=3),
            strict=st.booleans(),
        ),
        st.builds(
            AgentResult,
            session_id=ids,
            status=st.sampled_from(typing.get_args(AgentStatus)),
            output=json_values,
            error=st.none() | text,
            step_count=st.integers(0, 1000),
            stop_reason=stop_reasons,
        ),
        st.builds(
            StepProcessingPlan,
            assistant_message_plan=st.none()
            | st.builds(
                AssistantMessagePlan,
                content=st.none() | text,
                tool_calls=st.lists(ids.flatmap(parsed_tool_call), max_size=2),
            ),
            status_update=st.none()
            | st.builds(
                StatusUpdatePlan,
                status=st.sampled_from(["completed", "failed"]),
                output=json_values,
                error=st.none() | text,
            ),
            is_terminal=st.booleans(),
            output=json_values,
            stop_reason=stop_reasons,
            finish_tool_call_id=st.none() | ids,
            finish_errors=st.lists(
                st.builds(FinishToolError, tool_call_id=ids, error=text), max_size=2
            ),
        ),
        st.builds(
            FinishWithResolution,
            status=st.sampled_from(["continue", "completed", "failed"]),
            output=json_values,
            error=st.none() | text,
            tool_call_id=st.none() | ids,
            tool_name=st.none() | text,
        ),
        st.builds(RunawayGuard, error_counts=st.dictionaries(text, st.integers(0, 5), max_size=3)),
        st.builds(ToolEvent, type=text, data=json_values),
    )
)
def test_value_types_round_trip(model):
    assert round_trips(model)
