"""The app module of the remote sub-agent tests: ``helix-dbos serve --app remote_app:executor``.

DBOS on ``$HELIX_REMOTE_APP_URL``. ``remote-worker`` (the child, served by one server)
calls ``slow`` once, which appends a line to ``$HELIX_REMOTE_LEDGER`` and sleeps the
seconds its input names (``"sleep 2"``), then answers ``worked on <input>``.
``remote-lead`` (the parent, served by the other) hands its input to
``subagent__research``, the worker on the server at ``$HELIX_REMOTE_CHILD_URL``, and
answers with its result; ``remote-lost`` asks for an agent the child server does not
have; ``remote-both`` spawns the local companion ``remote-mate`` (non-blocking) and calls
the remote worker in one step, then waits for the companion's notice. The model is keyed on the transcript and the offered tools.
"""

from __future__ import annotations

import os
import time

from dbos import DBOS

from helix_dbos import (
    DBOSAgentExecutor,
    MockLLMAdapter,
    ToolContext,
    create_remote_sub_agent_tool,
    dbos_config,
    define_agent,
    persistent_agent,
    tool,
)
from helix_dbos.types import AssistantMessage, Message, StepResult, TextStepResult, ToolCallsStepResult, ToolResultMessage, ToolSpec, UserMessage

URL = os.environ["HELIX_REMOTE_APP_URL"]
CHILD_URL = os.environ.get("HELIX_REMOTE_CHILD_URL", "http://127.0.0.1:9")


@tool
def slow(seconds: float, ctx: ToolContext) -> dict:
    """Work for a while."""
    with open(os.environ["HELIX_REMOTE_LEDGER"], "a") as ledger:
        ledger.write(f"{ctx.session_id}\n")
    time.sleep(seconds)
    return {"slept": seconds}


@tool
def nap() -> dict:
    """Wait a little."""
    time.sleep(0.2)
    return {"napped": True}


def respond(messages: list[Message], tools: list[ToolSpec]) -> StepResult:
    step = sum(isinstance(m, AssistantMessage) for m in messages)
    task = next(str(m.content) for m in messages if isinstance(m, UserMessage))
    results = [m for m in messages if isinstance(m, ToolResultMessage)]
    if "nap" in {t.name for t in tools}:  # remote-both
        return both(step, task, messages)
    if [t.name for t in tools] == ["subagent__research"]:
        if step == 0:
            return ToolCallsStepResult(tool_calls=[{"id": "r1", "name": "subagent__research", "arguments": {"input": task}}])
        return TextStepResult(content=f"lead: {results[-1].content}", should_stop=True)
    if step == 0:
        seconds = float(task.split()[-1])
        return ToolCallsStepResult(tool_calls=[{"id": "s1", "name": "slow", "arguments": {"seconds": seconds}}])
    return TextStepResult(content=f"worked on {task}", should_stop=True)


def both(step: int, task: str, messages: list[Message]) -> StepResult:
    """Spawn companion m and call the remote child in one step; then nap until m's notice
    is in the transcript, and answer with both results."""
    if step == 0:
        return ToolCallsStepResult(tool_calls=[
            {"id": "c1", "name": "companion__spawnAgent", "arguments": {"agentType": "remote-mate", "message": task, "name": "m"}},
            {"id": "r1", "name": "subagent__research", "arguments": {"input": task}},
        ])
    notices = [str(m.content) for m in messages if isinstance(m, UserMessage) and str(m.content).startswith("[companion")]
    if not notices:
        return ToolCallsStepResult(tool_calls=[{"id": f"n{step}", "name": "nap", "arguments": {}}])
    remote = next(m.content for m in messages if isinstance(m, ToolResultMessage) and m.tool_call_id == "r1")
    return TextStepResult(content=f"both: {remote} | {' '.join(notices)}", should_stop=True)


worker = define_agent(name="remote-worker", system_prompt="Work.", tools=[slow])
mate = define_agent(name="remote-mate", system_prompt="Help.", tools=[slow])
lead = define_agent(name="remote-lead", system_prompt="Lead.",
                    tools=[create_remote_sub_agent_tool("research", CHILD_URL, agent="remote-worker")])
lost = define_agent(name="remote-lost", system_prompt="Lead.",  # its remote agent does not exist
                    tools=[create_remote_sub_agent_tool("research", CHILD_URL, agent="nobody")])

DBOS(config=dbos_config(URL, name=f"helix-remote-{os.environ.get('HELIX_REMOTE_ROLE', 'app')}",
                        notification_listener_polling_interval_sec=0.01))
executor = DBOSAgentExecutor(llm=MockLLMAdapter(responder=respond), database_url=URL)
both_agent = define_agent(
    name="remote-both", system_prompt="Lead both.", max_steps=100,
    tools=[nap, create_remote_sub_agent_tool("research", CHILD_URL, agent="remote-worker")],
    persistent_agents=[persistent_agent(mate, "non-blocking")],
)
executor.register(worker, lead, lost, both_agent)
