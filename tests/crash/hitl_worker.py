"""A worker process for the HITL crash test: one session whose tool needs approval.

    python hitl_worker.py URL SESSION_ID EXECUTOR_ID start|recover LEDGER_FILE [APPROVAL_TIMEOUT]

The model calls ``transfer`` (approval required, within APPROVAL_TIMEOUT seconds when
given), then answers with text. ``transfer`` appends a line to LEDGER_FILE each time it
really runs, so the test can count runs.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pydantic import BaseModel

from crash_kit import run_one_session
from helix_dbos import define_agent, define_tool
from helix_dbos.types import AssistantMessage, Message, StepResult, TextStepResult, ToolCallsStepResult, ToolSpec


class Transfer(BaseModel):
    amount: int


def transfer(args: Transfer, ctx: object) -> dict:
    with open(sys.argv[5], "a") as ledger:
        ledger.write(f"{args.amount}\n")
    return {"transferred": args.amount}


def respond(messages: list[Message], tools: list[ToolSpec]) -> StepResult:
    if not any(isinstance(m, AssistantMessage) for m in messages):
        return ToolCallsStepResult(tool_calls=[{"id": "t1", "name": "transfer", "arguments": {"amount": 100}}])
    return TextStepResult(content="transfer done", should_stop=True, stop_reason="end_turn")


agent = define_agent(
    name="hitl-crash-agent", system_prompt="Move money.",
    tools=[define_tool(name="transfer", description="Transfer money.", input_schema=Transfer, execute=transfer,
                       require_approval=True, approval_timeout=float(sys.argv[6]) if len(sys.argv) > 6 else None)],
)


def main() -> None:
    Path(sys.argv[5]).touch()
    run_one_session(agent, respond, message="pay")


if __name__ == "__main__":
    main()
