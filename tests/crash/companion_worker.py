"""A worker process for the companion crash test: a parent with two persistent companions.

    python companion_worker.py URL SESSION_ID EXECUTOR_ID start|recover LEDGER_DIR

The parent's first step spawns ``n`` (non-blocking) and then ``b`` (blocking); each
companion calls ``slow`` once, which appends a line to ``LEDGER_DIR/ledger_<name>.txt``
and takes 0.5 s, and answers with text. Then the parent answers with ``n``'s notice once
its transcript has it (at the start of step 2 or, after its tool ``wait_n`` waited for
``n``, of step 3). ``start`` begins the run; ``recover`` only launches DBOS (same executor
id), which recovers what the killed worker left PENDING, and waits for the parent. The
model is a responder keyed on the transcript, so a relaunched process answers exactly
as the killed one would have. The parent's result is printed as one JSON line.
"""

from __future__ import annotations

import sys
import time

import psycopg
from pydantic import BaseModel

from crash_kit import ledger_tool, run_one_session
from helix_dbos import ToolContext, define_agent, persistent_agent, tool
from helix_dbos._database import libpq_url
from helix_dbos.types import AssistantMessage, Message, StepResult, TextStepResult, ToolCallsStepResult, ToolSpec, UserMessage

TOOL_SECONDS = 0.5


class Nothing(BaseModel):
    pass


slow = ledger_tool(TOOL_SECONDS)


@tool
def wait_n(ctx: ToolContext) -> dict:
    """Wait until companion n completed."""
    with psycopg.connect(libpq_url(sys.argv[1]), autocommit=True) as conn:
        while conn.execute("SELECT status FROM helix.sessions WHERE id = %s", (f"{ctx.session_id}-agent-n",)).fetchone() != ("completed",):
            time.sleep(0.05)
    return {"n": "completed"}


def respond(messages: list[Message], tools: list[ToolSpec]) -> StepResult:
    step = sum(isinstance(m, AssistantMessage) for m in messages)
    if any(t.name == "wait_n" for t in tools):  # the parent
        if step == 0:
            return ToolCallsStepResult(tool_calls=[
                {"id": "s-n", "name": "companion__spawnAgent", "arguments": {"agentType": "crash-mate", "message": "n", "name": "n"}},
                {"id": "s-b", "name": "companion__spawnAgent", "arguments": {"agentType": "crash-boss-mate", "message": "b", "name": "b"}},
            ])
        notices = [str(m.content) for m in messages if isinstance(m, UserMessage) and str(m.content).startswith("[")]
        if notices:
            return TextStepResult(content=notices[-1], should_stop=True)
        return ToolCallsStepResult(tool_calls=[{"id": f"w{step}", "name": "wait_n", "arguments": {}}])
    name = next(str(m.content) for m in messages if isinstance(m, UserMessage))
    if step == 0:
        return ToolCallsStepResult(tool_calls=[{"id": f"k-{name}", "name": "slow", "arguments": {"label": name}}])
    return TextStepResult(content=f"{name} done", should_stop=True)


mate = define_agent(name="crash-mate", system_prompt="Work.", tools=[slow])
boss_mate = define_agent(name="crash-boss-mate", system_prompt="Work.", tools=[slow])
parent = define_agent(
    name="crash-lead", system_prompt="Lead.", tools=[wait_n], max_steps=5,
    persistent_agents=[persistent_agent(mate, "non-blocking"), persistent_agent(boss_mate, "blocking")],
)


if __name__ == "__main__":
    run_one_session(parent, respond)
