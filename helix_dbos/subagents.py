"""Sub-agents: a parent delegates to child agents through ``subagent__<name>`` tools.

Each call starts the child as a DBOS child workflow with its own session
(``<parent session>-sub-<tool call id>``), state and transcript; the parent resumes
with the child's output as the tool result::

    summarizer = define_agent(name="summarizer", ...)
    parent = define_agent(name="lead", tools=[create_sub_agent_tool(summarizer)], ...)
    executor.register(parent)        # registers the summarizer too

The model calls ``subagent__summarizer({"input": "..."})``; the child's user message is
that input (or what ``input_mapper`` makes of the validated arguments).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

from helix_dbos.agents import AgentConfig
from helix_dbos.tools import Tool
from helix_dbos.types import SUB_AGENT_TOOL_PREFIX


class SubAgentInput(BaseModel):
    """The default input of a sub-agent tool: the task, in words."""

    input: str = Field(description="The task for the sub-agent, with everything it needs to know.")


@dataclass(frozen=True)
class SubAgentSpec:
    """What a sub-agent tool dispatches to, and how it turns arguments into the child's input.

    Attributes:
        agent: The child agent.
        input_mapper: Makes the child's first user message of the validated arguments, or
            None.
    """

    agent: AgentConfig
    input_mapper: Callable[[Any], Any] | None = None

    def child_input(self, arguments: BaseModel) -> str:
        """The child's first user message for validated ``arguments``.

        Args:
            arguments: The call's validated arguments.

        Returns:
            The message's text.
        """
        return mapped_input(arguments, self.input_mapper)


def mapped_input(arguments: BaseModel, input_mapper: Callable[[Any], Any] | None) -> str:
    """A child's first user message: what ``input_mapper`` makes of the validated
    ``arguments``, else the ``input`` of :class:`SubAgentInput`, else the arguments as JSON.

    Args:
        arguments: The call's validated arguments.
        input_mapper: Makes the message of them, or None.

    Returns:
        The message's text.
    """
    if input_mapper is not None:
        mapped = input_mapper(arguments)
    elif isinstance(arguments, SubAgentInput):
        mapped = arguments.input
    else:
        mapped = arguments.model_dump(mode="json")
    if isinstance(mapped, str):
        return mapped
    if isinstance(mapped, BaseModel):
        return mapped.model_dump_json()
    return json.dumps(mapped, separators=(",", ":"))


def create_sub_agent_tool(
    agent: AgentConfig,
    name: str | None = None,
    description: str | None = None,
    input_schema: type[BaseModel] = SubAgentInput,
    input_mapper: Callable[[Any], Any] | None = None,
) -> Tool:
    """A tool ``subagent__<name>`` (default: the agent's name) that runs ``agent`` as a child.

    Args:
        agent: The child agent; registering the parent registers it too.
        name: The tool's name after ``subagent__``; default the agent's name.
        description: What the model is told the tool does; default from the agent.
        input_schema: A pydantic model of the arguments; default one ``input`` string.
        input_mapper: Makes the child's first user message of the validated arguments;
            default their ``input``, else the arguments as JSON.

    Returns:
        The tool, for ``define_agent(tools=[...])``.
    """
    agent_type = name or agent.name
    return Tool(
        name=f"{SUB_AGENT_TOOL_PREFIX}{agent_type}",
        description=description or f"Delegate a task to the {agent.name} agent and get its result.",
        input_schema=input_schema,
        execute=None,
        sub_agent=SubAgentSpec(agent, input_mapper),
    )


def child_session_id(parent_session_id: str, tool_call_id: str) -> str:
    """The session id of the child started by one sub-agent call.

    Args:
        parent_session_id: The parent's session.
        tool_call_id: The sub-agent call's id.

    Returns:
        ``<parent session>-sub-<tool call id>``.
    """
    return f"{parent_session_id}-sub-{tool_call_id}"


def sub_agents_of(agent: AgentConfig) -> list[AgentConfig]:
    """The agents reachable from ``agent``'s sub-agent tools and persistent agents,
    nearest first, each once.

    Args:
        agent: The parent agent.

    Returns:
        The agents.
    """
    found: dict[str, AgentConfig] = {}
    pending = [agent]
    while pending:
        current = pending.pop(0)
        children = [t.sub_agent.agent for t in current.tools if isinstance(t.sub_agent, SubAgentSpec)]
        children += [p.agent for p in current.persistent_agents]
        for child in children:
            if child.name not in found:
                found[child.name] = child
                pending.append(child)
    return list(found.values())
