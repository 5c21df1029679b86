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

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
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
        async. Exceptions propagate to the caller."""
        hook = getattr(self, hook_name)
        if hook is None:
            return
        result = hook(*args)
        if inspect.isawaitable(result):
            await result


@dataclass(frozen=True, eq=False)
class AgentConfig:
    """A validated agent definition. Build it with :func:`define_agent`."""

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
        ``__finish__`` last."""
        return [*self.tools, *self.companion_tools, *([self.finish_tool] if self.finish_tool else [])]

    def persistent_agent(self, agent_type: str) -> PersistentAgent | None:
        """The persistent agent of type ``agent_type``, or None."""
        return next((p for p in self.persistent_agents if p.agent_type == agent_type), None)

    def tool_specs(self) -> list[ToolSpec]:
        return [tool.spec() for tool in self.all_tools()]

    def timeout_of(self, tool: Tool) -> float | None:
        """How long a call of ``tool`` may run: its own ``timeout``, else ``tool_timeout``."""
        return tool.timeout if tool.timeout is not None else self.tool_timeout

    def get_tool(self, name: str) -> Tool | None:
        """The tool named ``name`` (including ``__finish__``), or ``None`` if there is none."""
        return next((tool for tool in self.all_tools() if tool.name == name), None)

    def initial_state(self) -> dict[str, Any]:
        """The custom state of a new session: ``state_schema`` defaults as JSON, else ``{}``."""
        return to_json_value(self.state_schema()) if self.state_schema else {}

    def system_prompt_for(self, custom_state: Any) -> str:
        """The system prompt for the current state, with the "## Output Requirement"
        section when the agent must finish through a tool."""
        prompt = resolve_system_prompt(self.system_prompt, custom_state)
        return with_output_requirement(prompt, self.finish_tool_name)

    async def should_stop(self, info: StopInfo) -> bool:
        """``max_steps`` OR-ed with ``stop_when`` over one run's ``StopInfo``,
        evaluated after each step that did not end the run by itself."""
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
) -> AgentConfig:
    """Define an agent.

    - ``system_prompt``: text, or a function of the custom state returning it.
    - ``output_schema``: the structured output; injects ``__finish__`` unless a tool has
      ``finish_with=True``.
    - ``state_schema``: the custom state; every field needs a default.
    - ``llm_config``: an :class:`LLMConfig`, a dict of its fields, or a litellm model string.
    - ``stop_when``: one stop condition or a list, OR-ed with ``max_steps``.
    - ``tool_timeout``: seconds a tool call may run when its tool sets no ``timeout``.
    - ``persistent_agents``: companions the model may spawn and talk to again
      (:func:`~helix_dbos.companions.persistent_agent`); injects the ``companion__`` tools.

    Raises :class:`AgentDefinitionError` for bad names, duplicate or reserved tool names,
    non-pydantic schemas, a state schema without defaults, and bad limits.
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
    if not all(callable(condition) for condition in agent.stop_when):
        fail("stop_when must be a stop condition or a list of them")
    if not isinstance(agent.hooks, AgentHooks):
        fail("hooks must be an AgentHooks")
    _validate_persistent_agents(agent.persistent_agents, fail)


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
