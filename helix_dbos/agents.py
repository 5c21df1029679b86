"""Agents: a system prompt, tools, schemas, an LLM config and limits.

::

    from pydantic import BaseModel

    class Sentiment(BaseModel):
        sentiment: Literal["positive", "negative", "neutral"]
        confidence: float

    analyzer = define_agent(
        "analyzer",
        "Analyze the input and return results",
        output_schema=Sentiment,          # injects the __finish__ tool
        llm_config="openai/gpt-4o",       # a litellm model string, a dict or an LLMConfig
    )
    [spec.name for spec in analyzer.tool_specs()]   # ['__finish__']

Definitions are checked when they are made (:class:`AgentDefinitionError`), never
mid-run. This module does no I/O.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal, NoReturn

from pydantic import BaseModel, RootModel, ValidationError

from helix_dbos.orchestration.prompts import (
    SystemPrompt,
    resolve_system_prompt,
    with_output_requirement,
)
from helix_dbos.orchestration.stop_conditions import (
    StopCondition,
    StopInfo,
    as_stop_condition_list,
    compile_stop_conditions,
)
from helix_dbos.orchestration.validation import to_json_value
from helix_dbos._text import find_unstorable
from helix_dbos.errors import AgentDefinitionError
from helix_dbos.tools import TOOL_NAME_PATTERN, Tool, is_positive_seconds
from helix_dbos.companions import PersistentAgent, companion_tools
from helix_dbos.toolsets import Toolset
from helix_dbos.types import COMPANION_TOOL_PREFIX, FINISH_TOOL_NAME, SUB_AGENT_TOOL_PREFIX, LLMConfig, ToolSpec

FINISH_TOOL_DESCRIPTION = (
    "Complete the task by returning your final output. "
    "The arguments of this call are the final output and must match its schema."
)

SuspensionReason = Literal["awaiting_approval", "awaiting_client_tool", "awaiting_children"]
"""Why a run suspended (``on_agent_suspended`` / ``on_agent_resumed``)."""

Hook = Callable[..., Any]

HookName = Literal[
    "before_tool",
    "after_tool",
    "on_state_change",
    "on_message",
    "on_agent_complete",
    "on_step_finish",
    "on_agent_suspended",
    "on_agent_resumed",
]


@dataclass(frozen=True)
class AgentHooks:
    """Optional lifecycle callbacks, each sync or async. The runtime fires them with
    :meth:`fire`; for one tool call the order is ``before_tool`` → execute →
    ``on_state_change`` → ``on_message`` → ``after_tool``.

    Signatures (``HookContext`` / ``ToolContext`` from :mod:`helix_dbos.tools`)::

        before_tool(call: ParsedToolCall, ctx: ToolContext)
        after_tool(call: ParsedToolCall, result: ToolResultMessage, ctx: ToolContext)
        on_state_change(state: dict, ctx: HookContext)          # state after the change
        on_message(message: Message, ctx: HookContext)          # each message appended
        on_agent_complete(result: AgentResult, ctx: HookContext)
        on_step_finish(step: StepInfo, ctx: HookContext)        # the step: result, usage, messages
        on_agent_suspended(reason: SuspensionReason, tool_call_ids: list[str], ctx: HookContext)
        on_agent_resumed(reason: SuspensionReason, ctx: HookContext)

    Attributes:
        before_tool: Before a tool call runs.
        after_tool: After a tool call's result is in the transcript.
        on_state_change: After a change of the custom state.
        on_message: After each message appended to the transcript.
        on_agent_complete: After the run ends.
        on_step_finish: After each step's commit.
        on_agent_suspended: Before a step waits (for approvals, a client tool or children).
        on_agent_resumed: After such a wait.

    Raises:
        AgentDefinitionError: A hook is not callable.
    """

    before_tool: Hook | None = None
    after_tool: Hook | None = None
    on_state_change: Hook | None = None
    on_message: Hook | None = None
    on_agent_complete: Hook | None = None
    on_step_finish: Hook | None = None
    on_agent_suspended: Hook | None = None
    on_agent_resumed: Hook | None = None

    def __post_init__(self) -> None:
        for hook_field in fields(self):
            hook = getattr(self, hook_field.name)
            if hook is not None and not callable(hook):
                raise AgentDefinitionError(f"Hook '{hook_field.name}' must be callable")

    async def fire(self, hook_name: HookName, *args: Any) -> None:
        """Call the hook named ``hook_name`` with ``args`` if it is set, awaiting it when
        async. Exceptions propagate to the caller.

        Args:
            hook_name: The hook's name, for example ``after_tool``.
            *args: What the hook receives (see the signatures above).
        """
        hook = getattr(self, hook_name)
        if hook is None:
            return
        result = hook(*args)
        if inspect.isawaitable(result):
            await result


@dataclass(frozen=True, eq=False)
class AgentConfig:
    """A validated agent definition. Build it with :func:`define_agent`.

    Attributes:
        name: The agent's name.
        system_prompt: Text, or a function of the custom state returning it.
        tools: The agent's own tools.
        output_schema: The structured output, or None.
        state_schema: The custom state, or None.
        llm_config: The model settings.
        max_steps: Steps a run may take at most.
        stop_when: The stop conditions, OR-ed with ``max_steps``.
        max_tool_concurrency: Tool calls of one step that run at once at most.
        hooks: The lifecycle callbacks.
    """

    name: str
    system_prompt: SystemPrompt
    tools: tuple[Tool, ...]
    output_schema: type[BaseModel] | None
    state_schema: type[BaseModel] | None
    llm_config: LLMConfig
    max_steps: int
    stop_when: tuple[StopCondition, ...]
    max_tool_concurrency: int
    hooks: AgentHooks
    tool_timeout: float | None = None
    """Seconds each executed tool call may run, for tools without their own ``timeout``."""
    persistent_agents: tuple[PersistentAgent, ...] = ()
    """The companions this agent may spawn (``helix_dbos.companions``)."""
    max_worker_losses: int = 2
    """How many workers a run may lose with the same tool call in flight: a run handed to
    another worker that many times with one call still running (each worker killed, or
    frozen for longer than its lease) ends ``failed`` instead of running the call again."""
    toolsets: tuple[Toolset, ...] = ()
    """Where more tools come from, listed once per run (``helix_dbos.toolsets``)."""
    finish_tool: Tool | None = field(init=False)
    """The injected ``__finish__`` tool: present when there is an ``output_schema`` and no
    finish_with tool."""

    def __post_init__(self) -> None:
        _validate_agent(self)
        finish_tool = None
        if self.output_schema is not None and not self.finish_with_tools:
            finish_tool = Tool(
                name=FINISH_TOOL_NAME,
                description=FINISH_TOOL_DESCRIPTION,
                input_schema=self.output_schema,
                execute=None,
                strict=self.llm_config.strict_output,
            )
        object.__setattr__(self, "finish_tool", finish_tool)
        object.__setattr__(self, "companion_tools", companion_tools(self.persistent_agents))

    @property
    def finish_with_tools(self) -> list[Tool]:
        return [tool for tool in self.tools if tool.finish_with]

    @property
    def finish_tool_name(self) -> str | None:
        """The tool the model must call to complete: the FIRST finish_with tool, else
        ``__finish__`` when there is an output schema, else ``None``."""
        if self.finish_with_tools:
            return self.finish_with_tools[0].name
        return self.finish_tool.name if self.finish_tool else None

    companion_tools: tuple[Tool, ...] = field(init=False)
    """The injected companion tools (none without ``persistent_agents``)."""

    def all_tools(self) -> list[Tool]:
        """The tools offered to the model, in definition order, then the companion tools,
        ``__finish__`` last.

        Returns:
            Every tool the model is offered.
        """
        return [*self.tools, *self.companion_tools, *([self.finish_tool] if self.finish_tool else [])]

    def with_listed_tools(self, listed: Sequence[Tool]) -> AgentConfig:
        """This agent with ``listed`` (a run's toolset tools) after its own tools.

        Args:
            listed: The tools a run's toolsets listed.

        Returns:
            A copy of the agent with those tools.
        """
        return replace(self, tools=(*self.tools, *listed))

    def persistent_agent(self, agent_type: str) -> PersistentAgent | None:
        """The persistent agent of type ``agent_type``, or None.

        Args:
            agent_type: The companion's agent name.

        Returns:
            Its configuration, or None when the agent has no such companion.
        """
        return next((p for p in self.persistent_agents if p.agent_type == agent_type), None)

    def tool_specs(self) -> list[ToolSpec]:
        """What the model is told about each tool of :meth:`all_tools`. The specs are made
        once per agent and shared by every model call: a model adapter reads them, and
        copies what it needs to change.

        Returns:
            One spec per tool: its name, description and JSON Schema.
        """
        return list(self._tool_specs)

    @functools.cached_property
    def _tool_specs(self) -> tuple[ToolSpec, ...]:
        return tuple(tool.spec() for tool in self.all_tools())

    @functools.cached_property
    def _tools_by_name(self) -> dict[str, Tool]:
        tools: dict[str, Tool] = {}
        for tool in self.all_tools():
            tools.setdefault(tool.name, tool)
        return tools

    def timeout_of(self, tool: Tool) -> float | None:
        """How long a call of ``tool`` may run: its own ``timeout``, else ``tool_timeout``.

        Args:
            tool: One of the agent's tools.

        Returns:
            Seconds, or None for no limit.
        """
        return tool.timeout if tool.timeout is not None else self.tool_timeout

    def get_tool(self, name: str) -> Tool | None:
        """The tool named ``name`` (including ``__finish__``), or ``None`` if there is none.

        Args:
            name: The tool's name.

        Returns:
            The tool, or None.
        """
        return self._tools_by_name.get(name)

    def initial_state(self) -> dict[str, Any]:
        """The custom state of a new session: ``state_schema`` defaults as JSON, else ``{}``.

        Returns:
            The state as JSON data.
        """
        return to_json_value(self.state_schema()) if self.state_schema else {}

    def system_prompt_for(self, custom_state: Any) -> str:
        """The system prompt for the current state, with the "## Output Requirement"
        section when the agent must finish through a tool.

        Args:
            custom_state: The session's custom state.

        Returns:
            The system prompt.
        """
        prompt = resolve_system_prompt(self.system_prompt, custom_state)
        return with_output_requirement(prompt, self.finish_tool_name)

    async def should_stop(self, info: StopInfo) -> bool:
        """``max_steps`` OR-ed with ``stop_when`` over one run's ``StopInfo``,
        evaluated after each step that did not end the run by itself.

        Args:
            info: The run's steps, step count and usage so far.

        Returns:
            True when the run must stop.
        """
        return await compile_stop_conditions(self.max_steps, self.stop_when)(info)


def define_agent(
    name: str,
    system_prompt: SystemPrompt = "",
    tools: Sequence[Tool] = (),
    output_schema: type[BaseModel] | None = None,
    state_schema: type[BaseModel] | None = None,
    llm_config: LLMConfig | dict[str, Any] | str | None = None,
    max_steps: int = 10,
    stop_when: StopCondition | Sequence[StopCondition] | None = None,
    max_tool_concurrency: int = 5,
    hooks: AgentHooks | None = None,
    tool_timeout: float | None = None,
    persistent_agents: Sequence[PersistentAgent] = (),
    max_worker_losses: int = 2,
    toolsets: Sequence[Toolset] = (),
) -> AgentConfig:
    """Define an agent: a validated, immutable :class:`AgentConfig`.

    Args:
        name: The agent's name: 1 to 64 letters, digits, ``_`` or ``-``; runs and
            sessions name their agent by it.
        system_prompt: Text, or a function of the custom state returning it.
        tools: The tools the model may call.
        output_schema: The structured output, a pydantic model; injects ``__finish__``
            unless a tool has ``finish_with=True``.
        state_schema: The custom state, a pydantic model; every field needs a default.
        llm_config: An :class:`~helix_dbos.types.LLMConfig`, a dict of its fields, or a
            litellm model string.
        max_steps: Steps a run may take at most.
        stop_when: One stop condition or a list (for example
            :func:`~helix_dbos.orchestration.step_count_is`), OR-ed with ``max_steps``.
        max_tool_concurrency: Tool calls of one step that run at once at most.
        hooks: Lifecycle callbacks.
        tool_timeout: Seconds a tool call may run when its tool sets no ``timeout``.
        persistent_agents: Companions the model may spawn and talk to again
            (:func:`~helix_dbos.companions.persistent_agent`); injects the
            ``companion__`` tools.
        max_worker_losses: How many workers a run may lose with the same tool call in
            flight (killed, or frozen for longer than their lease) before it ends
            ``failed`` instead of running that call again; so a tool that kills or
            freezes its process costs at most this many workers.
        toolsets: More tools, listed once per run, e.g. an MCP server's
            (:class:`~helix_dbos.mcp.MCPToolset`).

    Returns:
        The agent, ready to register with :meth:`~helix_dbos.DBOSAgentExecutor.register`.

    Raises:
        AgentDefinitionError: A bad name, duplicate or reserved tool names, non-pydantic
            schemas, a state schema without defaults, or bad limits.
    """
    return AgentConfig(
        name=name,
        system_prompt=system_prompt,
        tools=tuple(tools),
        output_schema=output_schema,
        state_schema=state_schema,
        llm_config=_llm_config(llm_config),
        max_steps=max_steps,
        stop_when=tuple(as_stop_condition_list(stop_when)),
        max_tool_concurrency=max_tool_concurrency,
        hooks=hooks if hooks is not None else AgentHooks(),
        tool_timeout=tool_timeout,
        persistent_agents=tuple(persistent_agents),
        max_worker_losses=max_worker_losses,
        toolsets=tuple(toolsets),
    )


def _llm_config(value: LLMConfig | dict[str, Any] | str | None) -> LLMConfig:
    if value is None:
        return LLMConfig()
    if isinstance(value, LLMConfig):
        return value
    if isinstance(value, str):
        return LLMConfig(model=value)
    try:
        return LLMConfig.model_validate(value)
    except ValidationError as error:
        raise AgentDefinitionError(f"Invalid llm_config: {error}") from error


def _validate_agent(agent: AgentConfig) -> None:
    def fail(problem: str) -> NoReturn:
        raise AgentDefinitionError(f"Agent '{agent.name}': {problem}")

    if not isinstance(agent.name, str) or not TOOL_NAME_PATTERN.fullmatch(agent.name):
        fail("name must be 1-64 characters of letters, digits, '_' or '-'")
    if not isinstance(agent.system_prompt, str) and not callable(agent.system_prompt):
        fail("system_prompt must be a string or a function of the state")
    _validate_tools(agent.tools, fail)
    if agent.output_schema is not None:
        _validate_output_schema(agent.output_schema, fail)
    if agent.state_schema is not None:
        _validate_state_schema(agent.state_schema, fail)
    if not isinstance(agent.max_steps, int) or agent.max_steps < 1:
        fail("max_steps must be an integer >= 1")
    if not isinstance(agent.max_tool_concurrency, int) or agent.max_tool_concurrency < 1:
        fail("max_tool_concurrency must be an integer >= 1")
    if agent.tool_timeout is not None and not is_positive_seconds(agent.tool_timeout):
        fail("tool_timeout must be a positive number of seconds")
    if not isinstance(agent.max_worker_losses, int) or isinstance(agent.max_worker_losses, bool) \
            or agent.max_worker_losses < 1:
        fail("max_worker_losses must be an integer >= 1")
    if not all(callable(condition) for condition in agent.stop_when):
        fail("stop_when must be a stop condition or a list of them")
    if not isinstance(agent.hooks, AgentHooks):
        fail("hooks must be an AgentHooks")
    _validate_persistent_agents(agent.persistent_agents, fail)
    _validate_toolsets(agent.toolsets, fail)


def _validate_toolsets(toolsets: Sequence[Any], fail: Callable[[str], NoReturn]) -> None:
    seen: set[str] = set()
    for toolset in toolsets:
        if not isinstance(toolset, Toolset):
            fail(f"{toolset!r} is not a toolset (an MCPToolset, or any helix_dbos.toolsets.Toolset)")
        if toolset.name in seen:
            fail(f"duplicate toolset name '{toolset.name}'")
        seen.add(toolset.name)


def _validate_persistent_agents(persistent: Sequence[Any], fail: Callable[[str], NoReturn]) -> None:
    seen: set[str] = set()
    for entry in persistent:
        if not isinstance(entry, PersistentAgent) or not isinstance(entry.agent, AgentConfig):
            fail(f"{entry!r} is not a persistent agent (make it with persistent_agent(agent, mode))")
        if entry.agent_type in seen:
            fail(f"duplicate persistent agent type '{entry.agent_type}'")
        seen.add(entry.agent_type)


def _validate_tools(tools: Sequence[Any], fail: Callable[[str], NoReturn]) -> None:
    seen: set[str] = set()
    for tool in tools:
        if not isinstance(tool, Tool):
            fail(f"{tool!r} is not a Tool (define it with define_tool or @tool)")
        if tool.name == FINISH_TOOL_NAME:
            fail(f"the tool name '{FINISH_TOOL_NAME}' is reserved for the framework")
        if tool.name.startswith(SUB_AGENT_TOOL_PREFIX) and not tool.is_sub_agent:
            fail(f"names starting with '{SUB_AGENT_TOOL_PREFIX}' are reserved for sub-agent tools")
        if tool.name.startswith(COMPANION_TOOL_PREFIX):
            fail(f"names starting with '{COMPANION_TOOL_PREFIX}' are reserved for the companion tools")
        if tool.name in seen:
            fail(f"duplicate tool name '{tool.name}'")
        seen.add(tool.name)


def _validate_output_schema(schema: Any, fail: Callable[[str], NoReturn]) -> None:
    if not (inspect.isclass(schema) and issubclass(schema, BaseModel)):
        fail("output_schema must be a pydantic model class")
    if issubclass(schema, RootModel):
        fail("output_schema must be an object model, not a RootModel (it is a tool's input)")


def _validate_state_schema(schema: Any, fail: Callable[[str], NoReturn]) -> None:
    if not (inspect.isclass(schema) and issubclass(schema, BaseModel)):
        fail("state_schema must be a pydantic model class")
    try:
        defaults = to_json_value(schema())
    except ValidationError as error:
        fail(f"every field of state_schema needs a default:\n{error}")
    unstorable = find_unstorable(defaults)
    if unstorable is not None:
        fail(f"the initial state (state_schema's defaults): {unstorable.describe('state')}")
