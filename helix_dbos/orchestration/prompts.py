"""Prompt text the framework writes: system prompt resolution, the output requirement
section and the ``max_tokens`` recovery nudge::

    >>> print(output_requirement_section("submit_answer"))
    ## Output Requirement
    This task requires structured output. You MUST complete your work by calling
    the `submit_answer` tool. This tool will process your output and complete the task.
    DO NOT use any other method to return your final answer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from helix_dbos.types import FINISH_TOOL_NAME, UserMessage

SystemPrompt = str | Callable[[Any], str]
"""A fixed system prompt, or a function of the session's custom state returning one."""


def resolve_system_prompt(system_prompt: SystemPrompt, custom_state: Any) -> str:
    """The prompt text: ``system_prompt`` itself, or ``system_prompt(custom_state)``.

    Args:
        system_prompt: Text, or a function of the custom state returning it.
        custom_state: The session's custom state.

    Returns:
        The prompt's text.

    Examples:
        >>> resolve_system_prompt(lambda state: f"Hi {state['name']}", {"name": "Ada"})
        'Hi Ada'
    """
    if isinstance(system_prompt, str):
        return system_prompt
    return system_prompt(custom_state)


def output_requirement_section(finish_tool_name: str) -> str:
    """The "## Output Requirement" section naming the tool that completes the task.

    Args:
        finish_tool_name: The tool the model must call to complete.

    Returns:
        The section's Markdown text.
    """
    return (
        "## Output Requirement\n"
        "This task requires structured output. You MUST complete your work by calling\n"
        f"the `{finish_tool_name}` tool. "
        "This tool will process your output and complete the task.\n"
        "DO NOT use any other method to return your final answer."
    )


def with_output_requirement(prompt: str, finish_tool_name: str | None) -> str:
    """``prompt`` followed by the output requirement section, when there is a finish tool.

    Args:
        prompt: The system prompt's text.
        finish_tool_name: The tool the model must call to complete, or None.

    Returns:
        The prompt, with the section when there is a finish tool.

    Examples:
        >>> with_output_requirement("Be brief.", None)
        'Be brief.'
        >>> with_output_requirement("Be brief.", "__finish__").splitlines()[:3]
        ['Be brief.', '', '## Output Requirement']
    """
    if finish_tool_name is None:
        return prompt
    section = output_requirement_section(finish_tool_name)
    return f"{prompt}\n\n{section}" if prompt else section


def max_tokens_recovery_message(finish_tool_name: str = FINISH_TOOL_NAME) -> UserMessage:
    """The correction sent after a ``max_tokens`` stop when the agent must produce
    structured output: do not write long text, call the completion tool directly.

    Args:
        finish_tool_name: The tool the model must call to complete.

    Returns:
        The user message to send.

    Examples:
        >>> "`__finish__`" in max_tokens_recovery_message().content
        True
    """
    return UserMessage(
        content=(
            "Your previous response was truncated because it reached the maximum output "
            "token limit (max_tokens). Do not write a long text response. Call the "
            f"`{finish_tool_name}` tool directly now with your final output, keeping it concise."
        )
    )
