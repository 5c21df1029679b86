"""A worker process for the memory crash tests: one session of a 3-step agent whose tool
remembers through ``ctx.memory``.

    python memory_worker.py URL SESSION_ID EXECUTOR_ID start|recover

Step k calls ``note(k)``, which remembers ``fact k`` and replaces the keyed memory
``counter`` with ``count k``, touches ``remembered_k`` in ``$HELIX_CRASH_DIR``, then takes
a while (the test kills the process there: after the remember, before the step's
commit). Then the model calls ``__finish__``. Prints the result as one JSON line.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from pydantic import BaseModel

sys.path.insert(0, str(Path(__file__).resolve().parent))
from crash_kit import run_one_session  # type: ignore[import-not-found]  # noqa: E402

from helix_dbos import ToolContext, define_agent, tool  # noqa: E402
from helix_dbos.types import AssistantMessage, Message, ToolCallsStepResult, ToolSpec  # noqa: E402

STEPS = 3
NAMESPACE = ("crash", "memory")


class Done(BaseModel):
    steps: int


@tool
def note(step: int, ctx: ToolContext) -> dict:
    """Remember the step's fact."""
    ctx.memory.remember(NAMESPACE, f"fact {step}")
    ctx.memory.remember(NAMESPACE, f"count {step}", key="counter")
    directory = os.environ.get("HELIX_CRASH_DIR")
    if directory:
        (Path(directory) / f"remembered_{step}").touch()
    time.sleep(0.3)
    return {"noted": step}


def respond(messages: list[Message], tools: list[ToolSpec]) -> ToolCallsStepResult:
    step = sum(isinstance(m, AssistantMessage) for m in messages) + 1
    if step > STEPS:
        return ToolCallsStepResult(tool_calls=[{"id": "finish", "name": "__finish__", "arguments": {"steps": STEPS}}])
    return ToolCallsStepResult(tool_calls=[{"id": f"n{step}", "name": "note", "arguments": {"step": step}}])


agent = define_agent(name="memory-crash", system_prompt="Note.", tools=[note], output_schema=Done, max_steps=10)

if __name__ == "__main__":
    run_one_session(agent, respond)
