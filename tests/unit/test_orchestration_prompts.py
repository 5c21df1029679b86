"""Prompt text: the output requirement section and the max_tokens recovery nudge."""

from helix_dbos.orchestration import (
    max_tokens_recovery_message,
    output_requirement_section,
    resolve_system_prompt,
    with_output_requirement,
)
from helix_dbos.types import UserMessage

SEED_FINISH_SECTION = """## Output Requirement
This task requires structured output. You MUST complete your work by calling
the `__finish__` tool. This tool will process your output and complete the task.
DO NOT use any other method to return your final answer."""

SEED_FINISH_WITH_SECTION = """## Output Requirement
This task requires structured output. You MUST complete your work by calling
the `submit_answer` tool. This tool will process your output and complete the task.
DO NOT use any other method to return your final answer."""


def test_seed_section_with_finish():
    assert output_requirement_section("__finish__") == SEED_FINISH_SECTION


def test_seed_section_with_finish_with_tool():
    assert output_requirement_section("submit_answer") == SEED_FINISH_WITH_SECTION


def test_section_is_appended_after_a_blank_line():
    assert with_output_requirement("You are a research analyst.", "__finish__") == (
        "You are a research analyst.\n\n" + SEED_FINISH_SECTION
    )


def test_section_alone_when_prompt_is_empty_and_nothing_without_tool():
    assert with_output_requirement("", "__finish__") == SEED_FINISH_SECTION
    assert with_output_requirement("Just chat.", None) == "Just chat."


def test_resolve_system_prompt_static_and_dynamic():
    assert resolve_system_prompt("fixed", {"ignored": True}) == "fixed"
    assert resolve_system_prompt(lambda state: f"n={state['n']}", {"n": 2}) == "n=2"


def test_max_tokens_recovery_message_nudges_to_call_the_tool():
    message = max_tokens_recovery_message()

    assert isinstance(message, UserMessage)
    assert "`__finish__`" in message.content
    assert "max_tokens" in message.content
    assert "truncated" in message.content


def test_max_tokens_recovery_message_names_a_finish_with_tool():
    assert "`submit_answer`" in max_tokens_recovery_message("submit_answer").content
