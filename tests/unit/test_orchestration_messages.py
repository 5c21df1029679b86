"""Message builders: every worked example, plus immutability."""

import datetime

from pydantic import BaseModel

from helix_dbos.orchestration import (
    AssistantMessagePlan,
    build_messages_for_llm,
    create_assistant_message,
    create_sub_agent_result_message,
    create_tool_result_message,
    json_stringify,
    unpaired_tool_call_ids,
)
from helix_dbos.types import (
    AssistantMessage,
    ParsedSubAgentCall,
    ParsedToolCall,
    SystemMessage,
    ThinkingContent,
    ToolResultMessage,
    UserMessage,
)


def test_seed_assistant_message_stores_sub_agent_calls_with_prefix():
    message = create_assistant_message(
        AssistantMessagePlan(
            tool_calls=[ParsedToolCall(id="t1", name="search", arguments={})],
            sub_agent_calls=[ParsedSubAgentCall(id="s1", agent_type="summarizer", input={})],
        )
    )

    assert message.tool_calls == [
        ParsedToolCall(id="t1", name="search", arguments={}),
        ParsedToolCall(id="s1", name="subagent__summarizer", arguments={}),
    ]


def test_assistant_message_keeps_content_and_thinking():
    thinking = ThinkingContent(content="because")
    message = create_assistant_message(AssistantMessagePlan(content="Hello!", thinking=thinking))

    assert message == AssistantMessage(content="Hello!", tool_calls=[], thinking=thinking)


def test_assistant_message_does_not_share_tool_calls_with_the_plan():
    plan = AssistantMessagePlan(
        tool_calls=[ParsedToolCall(id="t1", name="s", arguments={"a": [1]})]
    )
    message = create_assistant_message(plan)
    message.tool_calls[0].arguments["a"].append(2)

    assert plan.tool_calls[0].arguments == {"a": [1]}


def test_seed_tool_result_message():
    message = create_tool_result_message(
        tool_call_id="tc1", tool_name="search", result={"items": ["a", "b"]}, success=True
    )

    assert message == ToolResultMessage(
        tool_call_id="tc1", tool_name="search", content='{"items":["a","b"]}', is_error=False
    )


def test_error_tool_result_carries_error_text():
    message = create_tool_result_message("tc1", "search", success=False, error="Rate limited")

    assert message.content == "Rate limited"
    assert message.is_error is True


def test_error_tool_result_without_text_still_says_it_failed():
    message = create_tool_result_message("tc1", "search", success=False)

    assert message.content == "Tool execution failed"
    assert message.is_error is True


def test_seed_sub_agent_result_message():
    message = create_sub_agent_result_message(
        tool_call_id="s1", agent_type="summarizer", result={"summary": "..."}, success=True
    )

    assert message == ToolResultMessage(
        tool_call_id="s1", tool_name="subagent__summarizer", content='{"summary":"..."}'
    )


def test_sub_agent_error_result():
    message = create_sub_agent_result_message(
        "s1", "summarizer", success=False, error="child failed"
    )

    assert (message.tool_name, message.content, message.is_error) == (
        "subagent__summarizer",
        "child failed",
        True,
    )


class Item(BaseModel):
    when: datetime.date
    label: str


def test_json_stringify_is_compact_like_javascript():
    assert (
        json_stringify({"a": 1, "b": [True, None], "c": "é"}) == '{"a":1,"b":[true,null],"c":"é"}'
    )
    assert json_stringify(None) == "null"
    assert json_stringify("text") == '"text"'
    assert json_stringify(Item(when=datetime.date(2024, 1, 2), label="x")) == (
        '{"when":"2024-01-02","label":"x"}'
    )


def test_seed_build_messages_for_llm_resolves_dynamic_prompt():
    history = [UserMessage(content="hi")]
    state = {"notes": ["a", "b", "c", "d", "e"]}
    built = build_messages_for_llm(history, lambda s: f"You have {len(s['notes'])} notes.", state)

    assert built == [SystemMessage(content="You have 5 notes."), UserMessage(content="hi")]


def test_build_messages_for_llm_with_static_prompt_does_not_mutate_history():
    history = [UserMessage(content="hi")]
    built = build_messages_for_llm(history, "Be brief.", {})

    assert built[0] == SystemMessage(content="Be brief.")
    assert built[1:] == history
    assert history == [UserMessage(content="hi")]
    assert built is not history


def test_unpaired_tool_call_ids_in_history_order():
    messages = [
        AssistantMessage(
            tool_calls=[ParsedToolCall(id="a", name="x"), ParsedToolCall(id="b", name="y")]
        ),
        create_tool_result_message("a", "x", 1),
        AssistantMessage(tool_calls=[ParsedToolCall(id="c", name="z")]),
    ]

    assert unpaired_tool_call_ids(messages) == ["b", "c"]
    assert (
        unpaired_tool_call_ids(
            [*messages, create_tool_result_message("b", "y"), create_tool_result_message("c", "z")]
        )
        == []
    )
