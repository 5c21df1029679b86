"""Tools: what an agent can call. Define one with :func:`define_tool` or :func:`tool`::

    from pydantic import BaseModel

    class SearchInput(BaseModel):
        query: str

    search = define_tool(
        "search", "Search the web.", SearchInput,
        execute=lambda input, ctx: {"results": [input.query]},
    )

    @tool
    async def get_weather(city: str, ctx: ToolContext) -> dict:
        '''Get the current weather for a city.'''
        return {"city": city, "temp_c": 22}

``execute`` may be sync or async and receives the validated input model and a
:class:`ToolContext`. ``timeout`` (seconds; else the agent's ``tool_timeout``) bounds a
call: at the deadline ``ctx.abort_signal`` is set and the model gets an error result. ``execute="client"`` makes a client-executed tool: the runtime
suspends and waits for the result to be submitted. ``finish_with=True`` makes
a tool whose successful output completes the agent. ``require_approval``
gates a call on a human decision.

This module does no I/O; the runtime calls :meth:`Tool.parse_input`,
:meth:`Tool.needs_approval`, :meth:`Tool.run`, :meth:`Tool.dump_output` and
:meth:`Tool.outcome` inside its durable steps.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import inspect
import logging
import math
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, NoReturn, Protocol, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from helix_dbos.errors import AgentDefinitionError, HelixError, ReadOnlyStateError, ToolInputError
from helix_dbos.orchestration.finish_with import ToolCallOutcome
from helix_dbos.orchestration.validation import format_validation_error, to_json_value
from helix_dbos.types import FINISH_TOOL_NAME, ToolSpec

if TYPE_CHECKING:
    from helix_dbos._store.memory_records import MemoryWrite
    from helix_dbos.memory.context import ToolMemory

logger = logging.getLogger("helix_dbos")

TOOL_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
"""Valid tool (and agent) names: what every major provider accepts."""


# --- contexts -----------------------------------------------------------------------


class StateTrackerLike(Protocol):
    """What contexts need from the runtime's state tracker (``helix_dbos.state.StateTracker``)."""

    def get_state(self) -> Any:
        """The current state.

        Returns:
            The state, as the agent's ``state_schema`` model or a dict.
        """

    def update(self, fn: Callable[[Any], Any]) -> Any:
        """Change the state through a draft.

        Args:
            fn: Receives a mutable draft of the state and changes it.

        Returns:
            The state after the change.
        """


class ReadOnlyState:
    """The state where it cannot be changed: ``update_state`` raises
    :class:`ReadOnlyStateError` saying why (``reason``) instead of changing a copy that
    nobody keeps::

        ReadOnlyState(state, "require_approval predicates only decide whether a call waits")

    Args:
        state: The state to show.
        reason: Why it cannot be changed, said in the error.
    """

    def __init__(self, state: Any, reason: str) -> None:
        self._state = state
        self.reason = reason

    def get_state(self) -> Any:
        """The state.

        Returns:
            The state given to the constructor.
        """
        return self._state

    def update(self, fn: Callable[[Any], Any]) -> Any:
        """Refuse to change the state.

        Args:
            fn: The change, never applied.

        Raises:
            ReadOnlyStateError: Always, saying where the state can be changed.
        """
        raise ReadOnlyStateError(
            f"this context's state is read-only: {self.reason}. Change the state from a tool"
            " (ctx.update_state in execute) or from a hook that observes a committed step"
            " (on_message, after_tool, on_step_finish, on_agent_complete)"
        )


EmitFn = Callable[[str, Any], None]
"""Receives each custom event a tool emits: ``emit(event_type, data)``."""


class HookContext:
    """What hooks (and tools) see of the running agent: identity and custom state.

    ``get_state()`` reads the session's custom state; ``update_state(fn)`` changes it
    through the state tracker (``fn`` receives a mutable draft)::

        ctx.update_state(lambda draft: draft.update(last_saved_id=saved_id))

    Args:
        session_id: The session of the running agent.
        agent_name: The running agent's name.
        step: The current step, from 0.
        tracker: The session's state tracker.
    """

    def __init__(
        self, session_id: str, agent_name: str, step: int, tracker: StateTrackerLike
    ) -> None:
        self.session_id = session_id
        self.agent_name = agent_name
        self.step = step
        self._tracker = tracker

    def get_state(self) -> Any:
        """The session's custom state.

        Returns:
            The state, as the agent's ``state_schema`` model or a dict.
        """
        return self._tracker.get_state()

    def update_state(self, fn: Callable[[Any], Any]) -> Any:
        """Change the session's custom state through a draft.

        Args:
            fn: Receives a mutable draft of the state and changes it.

        Returns:
            The state after the change.

        Raises:
            ReadOnlyStateError: This context's state cannot be changed (a hook that runs
                before a step's commit).
            StateValidationError: The new state does not match the agent's ``state_schema``.
        """
        return self._tracker.update(fn)


class ToolEvent(BaseModel):
    """A custom event a tool emitted with :meth:`ToolContext.emit` (``data`` is JSON)."""

    model_config = ConfigDict(extra="forbid")

    type: str
    data: Any = None


class _Emitted:
    """Returned by :meth:`ToolContext.emit` so that ``await ctx.emit(...)`` also works."""

    __slots__ = ()

    def __await__(self) -> Any:
        return iter(())


AbortReason = Literal["timeout", "interrupt", "abort"]
"""Why a tool call was asked to stop: its deadline passed, or its run was interrupted or aborted."""


class AbortSignal:
    """Set when a running tool call should stop: ``ctx.abort_signal``.

    A sync tool polls it or sleeps on it; an async tool awaits it (and is cancelled at its
    next ``await`` if it does not return)::

        def crawl(input, ctx):
            for url in input.urls:
                if ctx.abort_signal.wait(0):      # or ctx.abort_signal.is_set()
                    break
                fetch(url)

        async def watch(input, ctx):
            await ctx.abort_signal.wait_async(timeout=60)
            return {"stopped_by": ctx.abort_signal.reason}

    ``reason`` is ``"timeout"``, ``"interrupt"`` or ``"abort"`` (the first one set wins).
    """

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._listeners: list[Callable[[AbortReason], object]] = []
        self.reason: AbortReason | None = None

    def is_set(self) -> bool:
        """Whether the call was asked to stop.

        Returns:
            True once the signal is set.
        """
        return self._event.is_set()

    def set(self, reason: AbortReason) -> bool:
        """Ask the call to stop; False when it already was asked (the first reason stays).

        Args:
            reason: ``timeout``, ``interrupt`` or ``abort``.

        Returns:
            True when this call set the signal.
        """
        with self._lock:
            if self._event.is_set():
                return False
            self.reason = reason
            self._event.set()
            listeners = list(self._listeners)
        for listener in listeners:
            listener(reason)
        return True

    def wait(self, timeout: float | None = None) -> bool:
        """Block the calling thread until the signal is set or ``timeout`` passes; whether it is set.

        Args:
            timeout: Seconds to wait at most; None waits until the signal is set.

        Returns:
            Whether the signal is set.
        """
        return self._event.wait(timeout)

    async def wait_async(self, timeout: float | None = None) -> bool:
        """Await the signal (or ``timeout``) without blocking the event loop; whether it is set.

        Args:
            timeout: Seconds to wait at most; None waits until the signal is set.

        Returns:
            Whether the signal is set.
        """
        loop = asyncio.get_running_loop()
        woken = asyncio.Event()
        self.add_listener(lambda _: loop.call_soon_threadsafe(woken.set))
        try:
            await asyncio.wait_for(woken.wait(), timeout)
        except asyncio.TimeoutError:
            pass
        return self.is_set()

    def add_listener(self, listener: Callable[[AbortReason], object]) -> None:
        """Call ``listener(reason)`` when the signal is set (now, if it already is), from
        the thread that sets it; what it returns is ignored.

        Args:
            listener: Called with the reason once the signal is set.
        """
        with self._lock:
            if not self._event.is_set():
                self._listeners.append(listener)
                return
            reason = self.reason
        assert reason is not None
        listener(reason)


class ToolContext(HookContext):
    """The context a tool's ``execute`` receives; the runtime builds one for each call.

    Besides :class:`HookContext`, it knows the ``tool_call_id``, can :meth:`emit` custom
    stream events (kept, in order, in :attr:`events`), and has the call's
    :class:`AbortSignal` in :attr:`abort_signal`.

    Args:
        session_id: The session of the running agent.
        tool_call_id: The call's id.
        agent_name: The running agent's name.
        step: The current step, from 0.
        tracker: The session's state tracker.
        emit: Receives each custom event as ``emit(event_type, data)``.
        abort_signal: The call's abort signal; default a new one.
        memory: The call's agent memory (:attr:`memory`); None outside an agent run.
    """

    def __init__(
        self,
        session_id: str,
        tool_call_id: str,
        agent_name: str,
        step: int,
        tracker: StateTrackerLike,
        emit: EmitFn | None = None,
        abort_signal: AbortSignal | None = None,
        memory: ToolMemory | None = None,
    ) -> None:
        super().__init__(session_id, agent_name, step, tracker)
        self.tool_call_id = tool_call_id
        self.events: list[ToolEvent] = []
        self.abort_signal = abort_signal if abort_signal is not None else AbortSignal()
        self._emit = emit
        self._memory = memory

    @property
    def memory(self) -> ToolMemory:
        """Agent memory (``helix_dbos.memory``), for a tool running in an agent run::

            ctx.memory.remember(("user", "u-42"), "prefers metric units")
            hits = ctx.memory.search(("user", "u-42"), "units")

        What the tool remembers or forgets commits with its step (never twice on a
        replay); a search reads the memories committed so far.

        Raises:
            HelixError: The context is not a running tool's (e.g. one built by hand).
        """
        if self._memory is None:
            raise HelixError("ctx.memory is only available to a tool running in an agent run")
        return self._memory

    @property
    def memory_writes(self) -> list[MemoryWrite]:
        """What the call remembered and forgot so far (committed with its step)."""
        return [] if self._memory is None else list(self._memory.writes)

    def emit(self, event_type: str, data: Any = None) -> _Emitted:
        """Emit a custom event; ``data`` must be JSON-able (pydantic models are dumped).

        Synchronous; may also be awaited (``await ctx.emit(...)``).

        Args:
            event_type: The event's type, chosen by the tool.
            data: The event's data: JSON-able, or a pydantic model.

        Returns:
            An awaitable that does nothing more.
        """
        event = ToolEvent(type=event_type, data=to_json_value(data))
        self.events.append(event)
        if self._emit is not None:
            self._emit(event.type, event.data)
        return _Emitted()


# --- tools --------------------------------------------------------------------------

ExecuteFn = Callable[[Any, ToolContext], Any]
"""``execute(input, ctx) -> output``, sync or async."""

ApprovalPredicate = Callable[[Any, ToolContext], bool]
"""``require_approval(input, ctx) -> bool``, evaluated per call (sync)."""


@dataclass(frozen=True, eq=False)
class Tool:
    """A tool an agent can call. Prefer :func:`define_tool` or :func:`tool` to build one.

    ``execute`` is ``None`` only for framework tools the runtime handles itself: the
    injected ``__finish__`` tool and sub-agent tools (``sub_agent`` set to the child
    agent's config by :func:`~helix_dbos.subagents.create_sub_agent_tool`).

    Attributes:
        name: The tool's name: 1 to 64 letters, digits, ``_`` or ``-``.
        description: What the model is told the tool does.
        input_schema: A pydantic model of the arguments.
        execute: ``execute(input, ctx) -> output``, sync or async; ``"client"`` for a
            tool the client executes; None only for framework tools.
        output_schema: A pydantic model the output is validated against (a dict is
            coerced into it).
        finish_with: The call's output ends the run as the agent's output.
        finish_with_transform: With ``finish_with``, turns the output into the agent's
            output.
        require_approval: True, or a synchronous predicate ``(input, ctx) -> bool``
            evaluated per call: the call waits for a person's decision before it runs.
        strict: Ask the provider for strict schema adherence of the arguments.
        approval_timeout: Seconds to wait for a decision before the call gets a timeout
            error; None waits forever.
        client_timeout: With ``execute="client"``, seconds to wait for the client's result
            before the call gets a timeout error; None waits forever.
        sub_agent: The child agent of a sub-agent tool.
    """

    name: str
    description: str
    input_schema: type[BaseModel]
    execute: ExecuteFn | Literal["client"] | None
    output_schema: type[BaseModel] | None = None
    finish_with: bool = False
    finish_with_transform: Callable[[Any], Any] | None = None
    require_approval: bool | ApprovalPredicate = False
    strict: bool = False
    approval_timeout: float | None = None
    client_timeout: float | None = None
    timeout: float | None = None
    """Seconds a call may run before it becomes a timeout error (None: the agent's ``tool_timeout``)."""
    sub_agent: Any = None
    companion: bool = False
    """One of the companion tools injected for ``persistent_agents`` (``helix_dbos.companions``)."""

    def __post_init__(self) -> None:
        _validate_tool(self)

    @property
    def is_client(self) -> bool:
        """Executed by the client: the runtime suspends until the result is submitted."""
        return self.execute == "client"

    @property
    def is_finish(self) -> bool:
        """The auto-injected ``__finish__`` tool (never executed)."""
        return self.name == FINISH_TOOL_NAME

    @property
    def is_sub_agent(self) -> bool:
        return self.sub_agent is not None

    def spec(self) -> ToolSpec:
        """What the model is told: name, description, JSON Schema of the input.

        Returns:
            The tool's name, description and JSON Schema of its input.
        """
        return ToolSpec(
            name=self.name,
            description=self.description,
            parameters=copy.deepcopy(self._input_json_schema),  # a copy: callers may edit theirs
            strict=self.strict,
        )

    @functools.cached_property
    def _input_json_schema(self) -> dict[str, Any]:
        """``input_schema``'s JSON Schema, generated once (it costs ~0.5 ms per call)."""
        return self.input_schema.model_json_schema()

    def parse_input(self, arguments: Any) -> BaseModel:
        """Validate the model's arguments (``None`` counts as ``{}``).

        Args:
            arguments: The model's arguments, a dict or None.

        Returns:
            The arguments as an ``input_schema`` model.

        Raises:
            ToolInputError: The arguments do not validate; lists every error.
        """
        try:
            return self.input_schema.model_validate({} if arguments is None else arguments)
        except ValidationError as error:
            raise ToolInputError(
                f"Invalid arguments for tool '{self.name}':\n{format_validation_error(error)}", self.name, error
            ) from error

    def needs_approval(self, input: Any, ctx: ToolContext) -> bool:
        """Whether this call waits for a human decision. Fails closed: a predicate that
        raises means approval is required.

        Args:
            input: The validated arguments.
            ctx: The call's context.

        Returns:
            True when the call must wait for a person.
        """
        if not callable(self.require_approval):
            return self.require_approval
        try:
            return bool(self.require_approval(input, ctx))
        except Exception:
            logger.warning(
                "require_approval of tool '%s' raised; requiring approval", self.name, exc_info=True
            )
            return True

    async def run(self, input: Any, ctx: ToolContext) -> Any:
        """Run ``execute(input, ctx)``, awaiting it when it is async. Exceptions propagate:
        the runtime turns them into error results for the model.

        Args:
            input: The validated arguments.
            ctx: The call's context.

        Returns:
            What ``execute`` returned.

        Raises:
            TypeError: The tool is not executed by the server.
        """
        if not callable(self.execute):
            raise TypeError(f"Tool '{self.name}' is not executed by the server")
        result = self.execute(input, ctx)
        if inspect.isawaitable(result):
            result = await result
        return result

    def dump_output(self, output: Any) -> Any:
        """``output`` as JSON data for the tool result and the step checkpoint.

        With an ``output_schema`` the output is validated against it first (a dict is
        coerced into the model).

        Args:
            output: What ``execute`` returned.

        Returns:
            The output as JSON data.

        Raises:
            pydantic.ValidationError: The output does not match ``output_schema``.
        """
        if self.output_schema is not None:
            output = self.output_schema.model_validate(output)
        return to_json_value(output)

    def finish_output(self, output: Any) -> Any:
        """The agent output for this finishWith tool's JSON ``output`` (from
        :meth:`dump_output`): loaded into ``output_schema`` when set, then passed through
        ``finish_with_transform`` when set.

        Args:
            output: The call's JSON output.

        Returns:
            The agent's output.
        """
        loaded = self.output_schema.model_validate(output) if self.output_schema else output
        if self.finish_with_transform is None:
            return loaded
        return self.finish_with_transform(loaded)

    def outcome(
        self, tool_call_id: str, *, output: Any = None, error: str | None = None
    ) -> ToolCallOutcome:
        """Describe how a call of this tool ended, for ``resolve_finish_with``.

        Args:
            tool_call_id: The call's id.
            output: The call's JSON output, when it succeeded.
            error: The call's error message, when it failed.

        Returns:
            The outcome.
        """
        return ToolCallOutcome(
            tool_call_id=tool_call_id,
            tool_name=self.name,
            finish_with=self.finish_with,
            output=output,
            error=error,
            transform=self.finish_output if self.finish_with else None,
        )


def _validate_tool(tool: Tool) -> None:
    def fail(problem: str) -> NoReturn:
        raise AgentDefinitionError(f"Tool '{tool.name}': {problem}")

    if not isinstance(tool.name, str) or not TOOL_NAME_PATTERN.fullmatch(tool.name):
        fail("name must be 1-64 characters of letters, digits, '_' or '-'")
    if not _is_model_class(tool.input_schema):
        fail("input_schema must be a pydantic model class of your own (a subclass of BaseModel)")
    if tool.output_schema is not None and not _is_model_class(tool.output_schema):
        fail("output_schema must be a pydantic model class of your own (a subclass of BaseModel)")
    if tool.execute is None and tool.sub_agent is None and not tool.is_finish and not tool.companion:
        fail("execute is required: a function (input, ctx) -> output, or 'client'")
    if callable(tool.execute) and not _accepts_two_positional(tool.execute):
        fail("execute must accept two positional arguments (input, ctx)")
    if isinstance(tool.execute, str) and tool.execute != "client":
        fail(f"execute must be a function or 'client', not {tool.execute!r}")
    if tool.is_client and tool.finish_with:
        fail("a client-executed tool (execute='client') cannot be finish_with")
    if tool.is_client and tool.require_approval is not False:
        fail("a client-executed tool (execute='client') cannot require_approval")
    if tool.finish_with and tool.require_approval is not False:
        fail("a finish_with tool cannot require_approval")
    if tool.finish_with_transform is not None and not tool.finish_with:
        fail("finish_with_transform requires finish_with=True")
    if inspect.iscoroutinefunction(tool.require_approval):
        fail("require_approval must be a bool or a synchronous function (input, ctx) -> bool")
    if tool.approval_timeout is not None and tool.require_approval is False:
        fail("approval_timeout requires require_approval")
    if tool.client_timeout is not None and not tool.is_client:
        fail("client_timeout requires execute='client'")
    if tool.timeout is not None and not callable(tool.execute):
        fail("timeout applies to tools the server executes (a client tool has client_timeout)")
    for timeout in (tool.approval_timeout, tool.client_timeout, tool.timeout):
        if timeout is not None and not is_positive_seconds(timeout):
            fail("timeouts must be positive numbers of seconds")


def is_positive_seconds(value: Any) -> bool:
    """A usable timeout: a finite number of seconds above zero (not a bool).

    Args:
        value: The value to check.

    Returns:
        True for a finite int or float above zero.
    """
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def _is_model_class(value: Any) -> bool:
    """A pydantic model of your own: a subclass of ``BaseModel``, not ``BaseModel`` itself
    (which has no schema)."""
    return inspect.isclass(value) and issubclass(value, BaseModel) and value is not BaseModel


def _accepts_two_positional(fn: Callable[..., Any]) -> bool:
    try:
        inspect.signature(fn).bind(None, None)
    except TypeError:
        return False
    except ValueError:  # no signature available (some builtins): trust the caller
        return True
    return True


def define_tool(
    name: str,
    description: str,
    input_schema: type[BaseModel],
    execute: ExecuteFn | Literal["client"] | None = None,
    *,
    output_schema: type[BaseModel] | None = None,
    finish_with: bool = False,
    finish_with_transform: Callable[[Any], Any] | None = None,
    require_approval: bool | ApprovalPredicate = False,
    strict: bool = False,
    approval_timeout: float | None = None,
    client_timeout: float | None = None,
    timeout: float | None = None,
) -> Tool:
    """Define a tool. Raises :class:`AgentDefinitionError` for invalid combinations:
    a missing ``execute``; ``execute="client"`` with ``finish_with``, ``require_approval``
    or ``timeout``; ``finish_with`` with ``require_approval``; a timeout that is not a
    positive number.

    ``approval_timeout`` / ``client_timeout`` are in seconds: how long the runtime waits
    for a decision / a client result before answering the call with a timeout error.
    ``timeout`` is how long ``execute`` may run (default: the agent's ``tool_timeout``,
    else no limit); then ``ctx.abort_signal`` is set and the model gets
    ``Tool 'name' timed out after Ns``.

    Args:
        name: The tool's name: 1 to 64 letters, digits, ``_`` or ``-``.
        description: What the model is told the tool does.
        input_schema: A pydantic model of the arguments.
        execute: ``execute(input, ctx) -> output``, sync or async, or ``"client"`` for a
            tool the client executes (its result is submitted with
            :class:`~helix_dbos.ClientToolResult`).
        output_schema: A pydantic model the output is validated against (a dict is
            coerced into it).
        finish_with: The call's output ends the run as the agent's output.
        finish_with_transform: With ``finish_with``, turns the output into the agent's
            output.
        require_approval: True, or a synchronous predicate ``(input, ctx) -> bool``
            evaluated per call: the call waits for a person's decision before it runs.
        strict: Ask the provider for strict schema adherence of the arguments.
        approval_timeout: Seconds to wait for a decision before the call gets a timeout
            error; None waits forever.
        client_timeout: With ``execute="client"``, seconds to wait for the client's result
            before the call gets a timeout error; None waits forever.
        timeout: Seconds ``execute`` may run before ``ctx.abort_signal`` is set and the
            call becomes a timeout error; default the agent's ``tool_timeout``.

    Returns:
        The tool.

    Raises:
        AgentDefinitionError: The definition is invalid.
    """
    if execute is None:
        raise AgentDefinitionError(
            f"Tool '{name}': execute is required: a function (input, ctx) -> output, or 'client'"
        )
    return Tool(
        name=name,
        description=description,
        input_schema=input_schema,
        execute=execute,
        output_schema=output_schema,
        finish_with=finish_with,
        finish_with_transform=finish_with_transform,
        require_approval=require_approval,
        strict=strict,
        approval_timeout=approval_timeout,
        client_timeout=client_timeout,
        timeout=timeout,
    )


# --- @tool ----------------------------------------------------------------------------


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    output_schema: type[BaseModel] | None = None,
    finish_with: bool = False,
    finish_with_transform: Callable[[Any], Any] | None = None,
    require_approval: bool | ApprovalPredicate = False,
    strict: bool = False,
    approval_timeout: float | None = None,
    timeout: float | None = None,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    output_schema: type[BaseModel] | None = None,
    finish_with: bool = False,
    finish_with_transform: Callable[[Any], Any] | None = None,
    require_approval: bool | ApprovalPredicate = False,
    strict: bool = False,
    approval_timeout: float | None = None,
    timeout: float | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a tool of a typed function, sync or async::

        @tool
        def search(query: str, limit: int = 10) -> list[str]:
            '''Search the web.'''

        @tool(finish_with=True)
        async def submit(answer: str, ctx: ToolContext) -> Submission: ...

    The name is the function's, the description its docstring, the input schema a
    pydantic model of its parameters (``Annotated[..., Field(...)]`` and ``Field``
    defaults work); a parameter annotated ``ToolContext`` receives the context and is
    not part of the schema. A return annotation that is a pydantic model becomes the
    ``output_schema``. Options are those of :func:`define_tool`.

    Args:
        fn: The function, when used as ``@tool`` without parentheses.
        name: The tool's name; default the function's.
        description: What the model is told; default the function's docstring.
        output_schema: A pydantic model the output is validated against; default the
            return annotation when it is one.
        finish_with: The call's output ends the run as the agent's output.
        finish_with_transform: With ``finish_with``, turns the output into the agent's
            output.
        require_approval: True, or a synchronous predicate ``(input, ctx) -> bool``
            evaluated per call: the call waits for a person's decision before it runs.
        strict: Ask the provider for strict schema adherence of the arguments.
        approval_timeout: Seconds to wait for a decision before the call gets a timeout
            error; None waits forever.
        timeout: Seconds ``execute`` may run before ``ctx.abort_signal`` is set and the
            call becomes a timeout error; default the agent's ``tool_timeout``.

    Returns:
        The tool, or (with options) a decorator that makes one.

    Raises:
        AgentDefinitionError: The definition is invalid.
    """

    def decorate(fn: Callable[..., Any]) -> Tool:
        input_schema, context_param = _input_model(fn)
        return Tool(
            name=name or fn.__name__,
            description=description if description is not None else inspect.getdoc(fn) or "",
            input_schema=input_schema,
            execute=_call_with_fields(fn, context_param),
            output_schema=output_schema or _model_return_type(fn),
            finish_with=finish_with,
            finish_with_transform=finish_with_transform,
            require_approval=require_approval,
            strict=strict,
            approval_timeout=approval_timeout,
            timeout=timeout,
        )

    return decorate if fn is None else decorate(fn)


def _input_model(fn: Callable[..., Any]) -> tuple[type[BaseModel], str | None]:
    """A pydantic model of ``fn``'s parameters, and the name of its context parameter."""
    hints = get_type_hints(fn, include_extras=True)
    fields: dict[str, Any] = {}
    context_param = None
    for param in inspect.signature(fn).parameters.values():
        annotation = hints.get(param.name, Any)
        if inspect.isclass(annotation) and issubclass(annotation, HookContext):
            context_param = param.name
            continue
        if param.kind not in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY):
            raise AgentDefinitionError(
                f"Tool '{fn.__name__}': parameter '{param.name}' must be a named parameter "
                "(no positional-only, *args or **kwargs)"
            )
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (annotation, default)
    model_name = "".join(part.title() for part in fn.__name__.split("_")) + "Input"
    return create_model(model_name, **fields), context_param


def _call_with_fields(fn: Callable[..., Any], context_param: str | None) -> ExecuteFn:
    """An ``execute(input, ctx)`` that calls ``fn`` with the input's fields as keywords;
    ``async`` exactly when ``fn`` is, so callers can tell the two apart."""

    def arguments(input: BaseModel, ctx: ToolContext) -> dict[str, Any]:
        kwargs = {name: getattr(input, name) for name in type(input).model_fields}
        if context_param is not None:
            kwargs[context_param] = ctx
        return kwargs

    if inspect.iscoroutinefunction(fn):

        async def execute_async(input: BaseModel, ctx: ToolContext) -> Any:
            return await fn(**arguments(input, ctx))

        return execute_async

    def execute(input: BaseModel, ctx: ToolContext) -> Any:
        return fn(**arguments(input, ctx))

    return execute


def _model_return_type(fn: Callable[..., Any]) -> type[BaseModel] | None:
    returned = get_type_hints(fn).get("return")
    return returned if _is_model_class(returned) else None
