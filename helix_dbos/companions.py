"""Persistent sub-agents ("companions"): children a parent can talk to again.

An agent configured with ``persistent_agents`` gets the companion tools, which the model
uses to start, message, watch and stop long-lived children::

    critic = define_agent(name="critic", output_schema=Verdict, ...)
    writer = define_agent(name="writer", persistent_agents=[persistent_agent(critic)], ...)

    companion__spawnAgent({"agentType": "critic", "message": "Review: ...", "name": "critic"})
    companion__sendMessage({"name": "critic", "message": "Revised: ..."})     # a fresh verdict

Each child is a session of its own, ``<parent session>-agent-<name>`` (a name the model
gives, else ``<agentType>-<counter>``), created by the parent and never adopted from
elsewhere. Every message to it is a run of that session: a ``blocking`` child's run is
awaited and its output is the tool's result; a ``non-blocking`` child's call returns at
once, and the child's end reaches the parent's transcript at the start of the parent's
next step, as a user message (``companion_notice``). This module holds the definitions
only; the run's workflow runs them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from helix_dbos.tools import Tool
from helix_dbos.types import COMPANION_TOOL_PREFIX

if TYPE_CHECKING:
    from helix_dbos.agents import AgentConfig

CompanionMode = Literal["blocking", "non-blocking"]

SPAWN = f"{COMPANION_TOOL_PREFIX}spawnAgent"
SEND = f"{COMPANION_TOOL_PREFIX}sendMessage"
LIST = f"{COMPANION_TOOL_PREFIX}listChildren"
STATUS = f"{COMPANION_TOOL_PREFIX}getChildStatus"
TERMINATE = f"{COMPANION_TOOL_PREFIX}terminateChild"
WAIT = f"{COMPANION_TOOL_PREFIX}waitForResult"


@dataclass(frozen=True)
class PersistentAgent:
    """A kind of companion a parent may spawn: the agent and how the parent waits for it.

    Attributes:
        agent: The companion's agent.
        mode: ``blocking`` or ``non-blocking``.
        description: What the parent's model is told of it; default the agent's name.
    """

    agent: AgentConfig
    mode: CompanionMode = "blocking"
    description: str | None = None

    @property
    def agent_type(self) -> str:
        """The companion's agent name, which the model spawns it by."""
        return self.agent.name


def persistent_agent(
    agent: AgentConfig, mode: CompanionMode = "blocking", description: str | None = None
) -> PersistentAgent:
    """``agent`` as a persistent sub-agent: ``blocking`` (the parent's call waits for the
    child's answer) or ``non-blocking`` (the call returns at once; the answer comes later).

    Args:
        agent: The companion's agent.
        mode: ``blocking`` or ``non-blocking``.
        description: What the parent's model is told of it.

    Returns:
        The persistent agent, for ``define_agent(persistent_agents=[...])``.
    """
    if mode not in ("blocking", "non-blocking"):
        raise ValueError(f"mode must be 'blocking' or 'non-blocking', not {mode!r}")
    return PersistentAgent(agent, mode, description)


class SpawnAgentInput(BaseModel):
    """The arguments of ``companion__spawnAgent``."""
    agentType: str = Field(description="Which kind of companion to start (one of the agent types listed).")
    message: str = Field(description="The task for the companion, with everything it needs to know.")
    name: str | None = Field(default=None, description="A name to address it by later (default: <agentType>-<n>).")


class SendMessageInput(BaseModel):
    """The arguments of ``companion__sendMessage``."""
    name: str = Field(description="The companion's name.")
    message: str = Field(description="The message: a new task, or feedback on its last answer.")


class ListChildrenInput(BaseModel):
    """The arguments of ``companion__listChildren``: none."""
    pass


class ChildNameInput(BaseModel):
    """The arguments of a companion tool that names one companion."""
    name: str = Field(description="The companion's name.")


class TerminateChildInput(BaseModel):
    """The arguments of ``companion__terminateChild``."""
    name: str = Field(description="The companion's name.")
    reason: str | None = Field(default=None, description="Why it is stopped.")


def companion_tools(persistent: tuple[PersistentAgent, ...]) -> tuple[Tool, ...]:
    """The tools injected into an agent with persistent agents: five always, and
    ``waitForResult`` when one of them is ``blocking``.

    Args:
        persistent: The agent's persistent agents.

    Returns:
        The tools; none without persistent agents.
    """
    if not persistent:
        return ()
    kinds = "; ".join(
        f"{p.agent_type} ({p.mode}{': ' + p.description if p.description else ''})" for p in persistent
    )
    tools = [
        _tool(SPAWN, SpawnAgentInput, f"Start a persistent companion agent, or consult an existing one again. Agent types: {kinds}."),
        _tool(SEND, SendMessageInput, "Send a message to a companion: a running one is interrupted and continues with it, a finished one answers it as a new turn."),
        _tool(LIST, ListChildrenInput, "List this agent's companions with their status."),
        _tool(STATUS, ChildNameInput, "A companion's status and its latest output or error."),
        _tool(TERMINATE, TerminateChildInput, "Stop a running companion."),
    ]
    if any(p.mode == "blocking" for p in persistent):
        tools.append(_tool(WAIT, ChildNameInput, "Wait until a companion finishes its current task; its output."))
    return tuple(tools)


def _tool(name: str, schema: type[BaseModel], description: str) -> Tool:
    return Tool(name=name, description=description, input_schema=schema, execute=None, companion=True)


def companion_session_id(parent_session_id: str, name: str) -> str:
    """The session id of the parent's companion named ``name``.

    Args:
        parent_session_id: The parent's session.
        name: The companion's name.

    Returns:
        ``<parent session>-agent-<name>``.
    """
    return f"{parent_session_id}-agent-{name}"


def companion_owner(name: str) -> str:
    """What a companion session records as its parent call (``parent_tool_call_id``).

    Args:
        name: The companion's name.

    Returns:
        The parent call id the companion session records.
    """
    return f"companion:{name}"


def notice_text(name: str, status: str, output: Any, error: str | None) -> str:
    """The user message that tells a parent a non-blocking companion finished.

    Args:
        name: The companion's name.
        status: How its run ended.
        output: Its output, when it completed.
        error: Its error, when it failed.

    Returns:
        The message's text.
    """
    if status == "completed":
        body = output if isinstance(output, str) else json.dumps(output, separators=(",", ":"))
        return f"[companion {name} completed] {body}"
    return f"[companion {name} {status}] {error or 'no output'}"
