"""A worker process for the hook crash tests: one session whose hooks write the state.

    python hook_worker.py URL SESSION_ID EXECUTOR_ID start|recover

``start`` begins the run; ``recover`` only launches DBOS, which recovers the run the
killed worker left PENDING, and waits for it. Each of ``STEPS`` steps calls ``note``
once, then the model answers with text. Every post-commit hook kind counts in the
state: ``on_message`` (messages), ``after_tool`` (tools), ``on_step_finish`` (steps),
``on_agent_complete`` (done). ``on_step_finish`` touches ``hooked_<step>`` in
``$HELIX_CRASH_DIR`` after its write and then sleeps, so the test can kill the process
between the hooks and the follow-up save. The result is printed as one JSON line.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from helix_dbos import AgentHooks, MockLLMAdapter, ToolContext, define_agent, launch_standalone, shutdown, tool
from helix_dbos.types import AssistantMessage, Message, StepInfo, StepResult, TextStepResult, ToolCallsStepResult, ToolSpec

STEPS = 3
HOOK_SECONDS = 0.3


class Counters(BaseModel):
    notes: list[int] = []
    messages: int = 0
    tools: int = 0
    steps: int = 0
    done: bool = False


@tool
def note(step: int, ctx: ToolContext) -> dict:
    """Note a step."""
    ctx.update_state(lambda d: d.notes.append(step))
    return {"noted": step}


def on_message(message: Any, ctx: Any) -> None:
    ctx.update_state(lambda d: setattr(d, "messages", d.messages + 1))


def after_tool(call: Any, result: Any, ctx: Any) -> None:
    ctx.update_state(lambda d: setattr(d, "tools", d.tools + 1))


def on_step_finish(step: StepInfo, ctx: Any) -> None:
    ctx.update_state(lambda d: setattr(d, "steps", d.steps + 1))
    directory = os.environ.get("HELIX_CRASH_DIR")
    if directory:
        (Path(directory) / f"hooked_{ctx.step}").touch()
    time.sleep(HOOK_SECONDS)


def on_agent_complete(result: Any, ctx: Any) -> None:
    ctx.update_state(lambda d: setattr(d, "done", True))


def respond(messages: list[Message], tools: list[ToolSpec]) -> StepResult:
    step = sum(isinstance(m, AssistantMessage) for m in messages) + 1
    if step > STEPS:
        return TextStepResult(content="all noted")
    return ToolCallsStepResult(tool_calls=[{"id": f"n{step}", "name": "note", "arguments": {"step": step}}])


agent = define_agent(
    name="hook-crash-agent", system_prompt="Note steps.", tools=[note], state_schema=Counters,
    hooks=AgentHooks(on_message=on_message, after_tool=after_tool, on_step_finish=on_step_finish,
                     on_agent_complete=on_agent_complete),
)


def main() -> None:
    url, session_id, executor_id, mode = sys.argv[1:5]
    executor = launch_standalone(
        MockLLMAdapter(responder=respond, delay_seconds=0.05), agents=[agent], database_url=url,
        executor_id=executor_id, notification_listener_polling_interval_sec=0.01, log_level="INFO",
    )
    handle = executor.execute(agent, "go", session_id=session_id) if mode == "start" else executor.handle(session_id)
    result = handle.result(timeout=120)
    state = executor.get_session(session_id).state
    print(json.dumps({"result": result.model_dump(mode="json"), "state": state}), flush=True)
    shutdown()


if __name__ == "__main__":
    main()
