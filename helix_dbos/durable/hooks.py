"""Calling user hooks so that they can never break a run.

A hook that raises is logged and ignored: hooks observe a run, they do not steer it.
"""

from __future__ import annotations

import logging
from typing import Any

from helix_dbos.agents import AgentHooks

logger = logging.getLogger("helix_dbos")


async def fire_hook(hooks: AgentHooks | None, name: str, *args: Any) -> None:
    """``hooks.fire(name, *args)``, logging instead of raising when the hook fails."""
    if hooks is None:
        return
    try:
        await hooks.fire(name, *args)
    except Exception:
        logger.exception("hook %s raised; ignoring it", name)
