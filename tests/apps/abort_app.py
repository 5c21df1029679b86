"""An app that aborts runs the normal way, with Python's logging left as it comes (no
``basicConfig``, no logger given to the executor): its stderr must stay empty.

    python abort_app.py DATABASE_URL APP_NAME    # prints one JSON line of the results

It aborts a run inside a tool, then resumes it to completion, and aborts a parent while
its sub-agent is inside a tool.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import uuid

from helix_dbos import (
    DBOSAgentExecutor,
    MockLLMAdapter,
    ToolContext,
    create_sub_agent_tool,
    dbos_config,
    define_agent,
    shutdown,
    tool,
)
from helix_dbos._client.launcher import launch_dbos
from helix_dbos.types import AssistantMessage, Message, StepResult, TextStepResult, ToolCallsStepResult, ToolSpec

URL, NAME = sys.argv[1], sys.argv[2]
entered = threading.Event()


@tool
def slow(ctx: ToolContext) -> dict[str, bool]:
    """Work until aborted."""
    entered.set()
    return {"aborted": ctx.abort_signal.wait(30)}


def respond(messages: list[Message], tools: list[ToolSpec]) -> StepResult:
    if not any(isinstance(m, AssistantMessage) for m in messages):
        names = [t.name for t in tools]
        name = next((n for n in names if n.startswith("subagent__")), "slow")
        arguments = {"input": "help"} if name.startswith("subagent__") else {}
        return ToolCallsStepResult(tool_calls=[{"id": f"c-{uuid.uuid4().hex[:8]}", "name": name, "arguments": arguments}])
    return TextStepResult(content="done", stop_reason="end_turn")


worker = define_agent(f"{NAME}-worker", system_prompt="Work.", tools=[slow])
boss = define_agent(f"{NAME}-boss", system_prompt="Delegate.", tools=[create_sub_agent_tool(worker)])


def abort_inside_the_tool(agent_name: str) -> tuple[str, str]:
    entered.clear()
    handle = executor.execute(agent_name, "go")
    if not entered.wait(30):
        raise SystemExit("the run never reached its tool")
    executor.abort(handle.session_id)
    return handle.session_id, handle.result(timeout=60).status


if __name__ == "__main__":
    from dbos import DBOS

    DBOS(config=dbos_config(URL, name=NAME))  # type: ignore[arg-type]
    executor = DBOSAgentExecutor(llm=MockLLMAdapter(respond), database_url=URL)
    executor.register(worker, boss)
    launch_dbos()
    session, aborted = abort_inside_the_tool(worker.name)
    resumed = executor.resume(worker, session).result(timeout=60).status
    _, parent_aborted = abort_inside_the_tool(boss.name)
    print(json.dumps({"aborted": aborted, "resumed": resumed, "parent_aborted": parent_aborted}), flush=True)
    # The parent reads aborted as soon as it is; DBOS threads waiting on the cancelled runs
    # notice a moment later. Shutting DBOS down under one of them makes DBOS log
    # "System database accessed before DBOS was launched", which is not what this app tests.
    deadline = time.monotonic() + 30
    while DBOS.list_workflows(status=["PENDING", "ENQUEUED"]) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(2.0)  # DBOS polls an awaited workflow once a second: its waiters notice the cancellations
    shutdown()
