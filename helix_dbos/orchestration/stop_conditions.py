"""Stop conditions over the loop state (an agent's ``stop_when``).

A :data:`StopCondition` is a plain function of :class:`StopInfo`, sync or async.
``max_steps`` is itself compiled into a condition and OR-ed with the rest, so
``stop_when`` can only stop earlier, never extend the step budget::

    >>> import asyncio
    >>> should_stop = compile_stop_conditions(10, [step_count_is(3)])
    >>> asyncio.run(should_stop(StopInfo(steps=[], step_count=3)))
    True

They are evaluated after a step that executed tools; a text-only step ends the loop
on its own.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any

from helix_dbos.types import SUB_AGENT_TOOL_PREFIX, StepResult, ToolCallsStepResult, Usage


@dataclass(frozen=True)
class StopInfo:
    """The loop state a stop condition sees, all of one run (one turn of a session, or
    the run a resume starts): its steps so far, their count, their LLM usage summed.

    Attributes:
        steps: The run's steps so far.
        step_count: How many there are.
        usage: Their model usage, summed.
    """

    steps: Sequence[StepResult]
    step_count: int
    usage: Usage = field(default_factory=Usage)


StopCondition = Callable[[StopInfo], bool | Awaitable[bool]]
"""Returns ``True`` to stop the loop. May be ``async``."""


def step_count_is(count: int) -> StopCondition:
    """Stop once ``count`` steps have run.

    Args:
        count: Steps of the run.

    Returns:
        The stop condition.
    """

    def condition(info: StopInfo) -> bool:
        return info.step_count >= count

    return condition


def has_tool_call(tool_name: str) -> StopCondition:
    """Stop once the latest step called ``tool_name`` (sub-agents as ``subagent__<type>``).

    Args:
        tool_name: The tool's name.

    Returns:
        The stop condition.
    """

    def condition(info: StopInfo) -> bool:
        if not info.steps or not isinstance(info.steps[-1], ToolCallsStepResult):
            return False
        last = info.steps[-1]
        names = [call.name for call in last.tool_calls]
        names += [f"{SUB_AGENT_TOOL_PREFIX}{call.agent_type}" for call in last.sub_agent_calls]
        return tool_name in names

    return condition


def total_tokens_exceed(max_tokens: int) -> StopCondition:
    """Stop once the run has used more than ``max_tokens`` tokens in total.

    Args:
        max_tokens: Tokens of the run, input and output.

    Returns:
        The stop condition.
    """

    def condition(info: StopInfo) -> bool:
        return info.usage.total_tokens > max_tokens

    return condition


def cost_exceeds(max_usd: float) -> StopCondition:
    """Stop once the run's known cost is more than ``max_usd`` (unknown cost never stops).

    Args:
        max_usd: US dollars.

    Returns:
        The stop condition.
    """

    def condition(info: StopInfo) -> bool:
        return info.usage.cost_usd is not None and info.usage.cost_usd > max_usd

    return condition


def compile_stop_conditions(
    max_steps: int, stop_when: StopCondition | Sequence[StopCondition] | None = None
) -> Callable[[StopInfo], Coroutine[Any, Any, bool]]:
    """One async predicate: ``step_count >= max_steps`` OR any of ``stop_when``
    (evaluated in order, stopping at the first that holds).

    Args:
        max_steps: Steps a run may take at most.
        stop_when: One stop condition, a list, or None.

    Returns:
        The predicate.
    """
    conditions = [step_count_is(max_steps), *as_stop_condition_list(stop_when)]

    async def should_stop(info: StopInfo) -> bool:
        for condition in conditions:
            verdict = condition(info)
            if inspect.isawaitable(verdict):
                verdict = await verdict
            if verdict:
                return True
        return False

    return should_stop


def as_stop_condition_list(
    stop_when: StopCondition | Sequence[StopCondition] | None,
) -> list[StopCondition]:
    """``stop_when`` as a list: ``None`` is empty, one condition becomes a list of one.

    Args:
        stop_when: One stop condition, a list, or None.

    Returns:
        The list.
    """
    if stop_when is None:
        return []
    if callable(stop_when):
        return [stop_when]
    return list(stop_when)
