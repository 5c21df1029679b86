"""Calling user hooks, and saving what the hooks of a committed step write to the state.

A hook that raises is logged (event ``hook.failed``) and ignored: hooks observe a run,
they do not steer it::

    await fire_hook(agent.hooks, "on_step_finish", info, ctx)

``on_message``, ``after_tool``, ``on_step_finish`` and ``on_agent_complete`` run after
their step's commit. Their ``ctx.update_state`` changes one :class:`HookState` per step,
which starts from the state the step committed (its merged tool writes included). When
they changed it, ONE checkpointed transaction (``helix_save_hook_state``) appends the
change to the patch log (the step's second patch), refreshes the step's snapshot if it
has one, and streams it as a ``state_patch`` event::

    written = HookState(committed_state, agent.state_schema)
    ctx = written.context(scope, step_no)
    ...                                   # fire the hooks with ctx
    state = await written.save(scope, step_no, snapshot=False)   # the state after the step

A step whose hooks change nothing costs nothing more: no DBOS step, no transaction.
A recovered run replays the step's commit from its checkpoint and runs the hooks again,
which compute their change again; the save then runs once (it had not) or returns its
checkpoint (it had), and what it stored becomes the loop's state, so a hook's write is
applied exactly once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from helix_dbos.agents import AgentHooks, HookName
from helix_dbos._durable.run_scope import RunScope
from helix_dbos._durable.runtime import current_runtime
from helix_dbos.state import StateDict, StateTracker, apply_rfc6902
from helix_dbos._store.records import HookStateSave
from helix_dbos.tools import HookContext
from helix_dbos.types import AssistantMessage, Message, ParsedToolCall, StepInfo, StepResult, ToolResultMessage, Usage

logger = logging.getLogger("helix_dbos")


async def fire_hook(hooks: AgentHooks | None, name: HookName, *args: Any) -> None:
    """``hooks.fire(name, *args)``, logging instead of raising when the hook fails."""
    if hooks is None:
        return
    try:
        await hooks.fire(name, *args)
    except Exception:
        current_runtime().log.error("hook.failed", hook=name, exc_info=True)


AFTER_COMMIT_HOOKS: tuple[HookName, ...] = ("on_message", "after_tool", "on_step_finish", "on_agent_complete")
"""The hooks that observe a committed step."""


def observe_commits(hooks: AgentHooks) -> bool:
    """Whether any hook observes a committed step: without one, a step fires nothing
    after its commit, builds no :class:`StepInfo` and has no :class:`HookState` to save."""
    return any(getattr(hooks, name) is not None for name in AFTER_COMMIT_HOOKS)


def step_info(
    step_no: int, first: bool, step_result: StepResult, usage: Usage, messages: list[Message]
) -> StepInfo:
    """What ``on_step_finish`` gets: the step's result, usage and appended ``messages``."""
    assistant = next((m for m in messages if isinstance(m, AssistantMessage)), None)
    thinking = getattr(step_result, "thinking", None)
    return StepInfo(
        step=step_no,
        step_type="initial" if first else "tool_result",
        type=step_result.type,
        text=(assistant.content if assistant is not None else None) or "",
        reasoning=thinking.content if thinking is not None else None,
        tool_calls=tool_calls_of(messages),
        tool_results=[m for m in messages if isinstance(m, ToolResultMessage)],
        stop_reason=step_result.stop_reason,
        error=getattr(step_result, "error", None),
        usage=usage,
        messages=messages,
    )


def tool_calls_of(messages: list[Message]) -> list[ParsedToolCall]:
    return [call for m in messages if isinstance(m, AssistantMessage) for call in m.tool_calls]


class HookState:
    """The state as the hooks of one committed step see and change it.

    The tracker that records changes is made on the first ``update`` (validating against
    the agent's ``state_schema``), so hooks that only read cost what they did before.
    """

    def __init__(self, committed: dict[str, Any], schema: type[BaseModel] | None) -> None:
        self.committed = committed
        self._schema = schema
        self._view: StateDict | None = None
        self._tracker: StateTracker | None = None

    def get_state(self) -> StateDict:
        if self._tracker is not None:
            return self._tracker.get_state()
        if self._view is None:
            self._view = StateTracker(self.committed).get_state()
        return self._view

    def update(self, fn: Callable[[Any], Any]) -> StateDict:
        if self._tracker is None:
            self._tracker = StateTracker(self.get_state(), array_delta_mode=True, schema=self._schema)
        return self._tracker.update(fn)

    def patch(self) -> list[dict[str, Any]]:
        """What the hooks changed, as RFC 6902 operations against the committed state."""
        return [] if self._tracker is None else [dict(op) for op in self._tracker.get_rfc6902_patches()]

    def context(self, scope: RunScope, step_no: int) -> HookContext:
        return HookContext(scope.session_id, scope.agent.name, step_no, self)

    async def save(self, scope: RunScope, step_no: int, snapshot: bool) -> dict[str, Any]:
        """Save what the hooks changed, if anything (one checkpointed transaction); the
        state after the step as stored. ``snapshot``: the step keeps a full copy of the state."""
        patch = self.patch()
        if not patch:
            return self.committed
        assert self._tracker is not None
        save = HookStateSave(
            session_id=scope.session_id, run=scope.request.run, step=step_no, patch=patch,
            snapshot=self._tracker.get_state().dump() if snapshot else None,
        )
        stored = await asyncio.to_thread(current_runtime().save_hook_state, save)
        if stored is None:
            logger.warning(
                "state written by hooks of step %s of session %s was not saved: the session has moved on",
                step_no, scope.session_id,
            )
            return self.committed
        new_state: dict[str, Any] = apply_rfc6902(self.committed, stored)
        return new_state
