"""Remote sub-agents: a sub-agent served by another helix agent server.

    researcher = create_remote_sub_agent_tool(
        "researcher", "http://research.internal:8000/agents", agent="deep-researcher",
        auth={"Authorization": "Bearer s3cret"},
    )
    lead = define_agent(name="lead", tools=[researcher], ...)

The model calls ``subagent__researcher({"input": "..."})`` as it calls a local sub-agent.
The parent starts the child on the remote server (``POST /start``) under a deterministic
session id, ``<parent session>-remote-<tool call id>``, proxies the remote stream into its
own as ``subagent_event`` frames while it waits, and reads the child's result from
``GET /status``. A recovered parent asks ``/status`` first and re-attaches to a child it
started before instead of starting it again; an interrupt or abort of the parent is sent
on (``POST /interrupt``, ``POST /abort``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from helix_dbos.subagents import SubAgentInput, mapped_input
from helix_dbos.tools import Tool
from helix_dbos.types import SUB_AGENT_TOOL_PREFIX

Auth = Mapping[str, str] | Callable[[], Mapping[str, str]] | None
"""Headers sent with every request to the remote server, or a function that makes them
(called for each request, so a token can be refreshed; nothing of it is checkpointed)."""


@dataclass(frozen=True)
class RemoteSubAgentSpec:
    """Where a remote sub-agent tool sends its calls.

    Attributes:
        url: The server's base URL.
        agent: The agent's name on that server.
        auth: Headers for every request, or a function that makes them.
        input_mapper: Makes the child's first user message of the validated arguments, or
            None.
    """

    url: str
    agent: str
    auth: Auth = None
    input_mapper: Callable[[Any], Any] | None = None

    def headers(self) -> dict[str, str]:
        """The headers for one request to the remote server.

        Returns:
            The headers (``auth`` called, when it is a function).
        """
        given = self.auth() if callable(self.auth) else self.auth
        return dict(given or {})

    def child_input(self, arguments: BaseModel) -> str:
        """The remote child's first user message for validated ``arguments``.

        Args:
            arguments: The call's validated arguments.

        Returns:
            The message's text.
        """
        return mapped_input(arguments, self.input_mapper)


def create_remote_sub_agent_tool(
    name: str,
    url: str,
    agent: str,
    auth: Auth = None,
    description: str | None = None,
    input_schema: type[BaseModel] = SubAgentInput,
    input_mapper: Callable[[Any], Any] | None = None,
) -> Tool:
    """A tool ``subagent__<name>`` that runs agent ``agent`` of the helix agent server at
    ``url`` (the base its routes hang off, e.g. ``http://host:8000/agents``) as a child.

    Args:
        name: The tool's name after ``subagent__``.
        url: The server's base URL.
        agent: The agent's name on that server.
        auth: Headers for every request, or a function that makes them (called for each
            request, so a token can be refreshed).
        description: What the model is told the tool does.
        input_schema: A pydantic model of the arguments; default one ``input`` string.
        input_mapper: Makes the child's first user message of the validated arguments.

    Returns:
        The tool, for ``define_agent(tools=[...])``.
    """
    return Tool(
        name=f"{SUB_AGENT_TOOL_PREFIX}{name}",
        description=description or f"Delegate a task to the remote {agent} agent and get its result.",
        input_schema=input_schema,
        execute=None,
        sub_agent=RemoteSubAgentSpec(url.rstrip("/"), agent, auth, input_mapper),
    )


def remote_session_id(parent_session_id: str, tool_call_id: str) -> str:
    """The session id, on the remote server, of the child started by one call.

    Args:
        parent_session_id: The parent's session.
        tool_call_id: The sub-agent call's id.

    Returns:
        ``<parent session>-remote-<tool call id>``.
    """
    return f"{parent_session_id}-remote-{tool_call_id}"
