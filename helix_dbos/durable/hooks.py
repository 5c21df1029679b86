"""Calling user hooks so that they can never break a run.

A hook that raises is logged (event ``hook.failed``) and ignored: hooks observe a run,
they do not steer it.
"""

from __future__ import annotations

from typing import Any

from helix_dbos.agents import AgentHooks
from helix_dbos.durable.runtime import current_runtime


async def fire_hook(hooks: AgentHooks | None, name: str, *args: Any) -> None:
    """``hooks.fire(name, *args)``, logging instead of raising when the hook fails."""
    if hooks is None:
        return
    try:
        await hooks.fire(name, *args)
    except Exception:
        current_runtime().log.error("hook.failed", hook=name, exc_info=True)
