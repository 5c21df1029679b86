"""A user's DBOS app that starts an agent from its OWN workflow (the crash test's process).

    python embedded_app.py URL MODE WORKFLOW_ID GATE_FILE LEDGER_FILE [SESSION_ID]

MODE ``start`` starts the user's workflow ``onboard`` with id WORKFLOW_ID; ``recover``
only launches (DBOS recovers the pending workflows of this executor id and version) and
waits for WORKFLOW_ID to end. The agent's tool appends to LEDGER_FILE, then blocks until
GATE_FILE exists, so the test can SIGKILL the app mid-run.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from dbos import DBOS, SetWorkflowID
from pydantic import BaseModel

from helix_dbos import DBOSAgentExecutor, MockLLMAdapter, ToolContext, dbos_config, define_agent, define_tool
from helix_dbos.types import AssistantMessage, Message, StepResult, TextStepResult, ToolCallsStepResult, ToolSpec

URL, MODE, WORKFLOW_ID, GATE, LEDGER = sys.argv[1:6]
SESSION_ID = sys.argv[6] if len(sys.argv) > 6 else None


class Welcome(BaseModel):
    name: str


def welcome(args: Welcome, ctx: ToolContext) -> dict[str, str]:
    with open(LEDGER, "a") as ledger:
        ledger.write(f"{ctx.session_id}\n")
    while not Path(GATE).exists():
        time.sleep(0.02)
    return {"welcomed": args.name}


def respond(messages: list[Message], tools: list[ToolSpec]) -> StepResult:
    if not any(isinstance(m, AssistantMessage) for m in messages):
        return ToolCallsStepResult(tool_calls=[{"id": "w1", "name": "welcome", "arguments": {"name": "ana"}}])
    return TextStepResult(content="ana is welcome", should_stop=True, stop_reason="end_turn")


greeter = define_agent(
    "greeter", system_prompt="Welcome people.",
    tools=[define_tool("welcome", "Welcome someone.", Welcome, welcome)],
)

DBOS(config=dbos_config(URL, name="embedding-crash-app", executor_id="app-1",
                        notification_listener_polling_interval_sec=0.01))  # type: ignore[arg-type]
executor = DBOSAgentExecutor(llm=MockLLMAdapter(responder=respond), database_url=URL)
executor.register(greeter)


@DBOS.workflow()
def onboard(name: str) -> dict[str, object]:
    handle = executor.execute(greeter, f"welcome {name}", session_id=SESSION_ID)
    result = handle.result()
    return {"session_id": handle.session_id, "status": result.status, "output": result.output}


def main() -> None:
    DBOS.launch()
    if MODE == "start":
        with SetWorkflowID(WORKFLOW_ID):
            DBOS.start_workflow(onboard, "ana")
    handle = DBOS.retrieve_workflow(WORKFLOW_ID)
    print(json.dumps(handle.get_result()), flush=True)
    DBOS.destroy(destroy_registry=False)


if __name__ == "__main__":
    main()
