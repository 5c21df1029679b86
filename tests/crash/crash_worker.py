"""A worker process for the crash tests: runs one session of a 5-step agent.

    python crash_worker.py URL SESSION_ID EXECUTOR_ID start|recover

``start`` begins the run; ``recover`` only launches DBOS, which recovers the run the
killed worker left PENDING, and waits for it. Each step calls two tools in parallel
(each appends to the state, one also replaces a scalar), then the model calls
``__finish__``. The model is a responder keyed on the transcript, so a relaunched
process answers exactly as the killed one would have. Tools touch a marker file in
``$HELIX_CRASH_DIR`` while they run, so the test can kill the process inside a tool.
The result is printed as one JSON line.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from pydantic import BaseModel

from helix_dbos import MockLLMAdapter, ToolContext, define_agent, launch_standalone, shutdown, tool
from helix_dbos.types import AssistantMessage, Message, ToolCallsStepResult, ToolSpec

STEPS = 5
TOOL_SECONDS = 0.06


class Notes(BaseModel):
    notes: list[str] = []
    last: str = ""


class Report(BaseModel):
    count: int


def _mark(name: str) -> None:
    directory = os.environ.get("HELIX_CRASH_DIR")
    if directory:
        (Path(directory) / name).touch()


@tool
def record(step: int, label: str, ctx: ToolContext) -> dict:
    """Record a note for a step."""
    _mark(f"in_tool_{step}_{label}")
    time.sleep(TOOL_SECONDS if label == "a" else 5 * TOOL_SECONDS)  # a's result streams while b runs
    ctx.update_state(lambda d: d.notes.append(f"{step}{label}"))
    if label == "b":
        ctx.update_state(lambda d: setattr(d, "last", f"{step}{label}"))
    return {"recorded": f"{step}{label}"}


def respond(messages: list[Message], tools: list[ToolSpec]) -> ToolCallsStepResult:
    step = sum(isinstance(m, AssistantMessage) for m in messages) + 1
    if step > STEPS:
        return ToolCallsStepResult(tool_calls=[{"id": "finish", "name": "__finish__", "arguments": {"count": STEPS * 2}}])
    return ToolCallsStepResult(
        tool_calls=[
            {"id": f"s{step}a", "name": "record", "arguments": {"step": step, "label": "a"}},
            {"id": f"s{step}b", "name": "record", "arguments": {"step": step, "label": "b"}},
        ]
    )


agent = define_agent(
    name="crash-agent", system_prompt="Record notes.", tools=[record], output_schema=Report,
    state_schema=Notes, max_steps=20,
)


def main() -> None:
    url, session_id, executor_id, mode = sys.argv[1:5]
    executor = launch_standalone(
        MockLLMAdapter(responder=respond, delay_seconds=0.02), agents=[agent], database_url=url,
        executor_id=executor_id, notification_listener_polling_interval_sec=0.01, log_level="INFO",
    )
    handle = executor.execute(agent, "go", session_id=session_id) if mode == "start" else executor.handle(session_id)
    result = handle.result(timeout=120)
    print(json.dumps(result.model_dump(mode="json")), flush=True)
    shutdown()


if __name__ == "__main__":
    main()
