"""Runs N sessions at once and prints each one's final status as JSON (the storm test's app).

    python storm_app.py URL N

Each session: steps 1 to 3 call ``note`` twice in parallel (each appends a line to the
ledger table ``storm.ledger`` and sleeps 0.3 s), step 4 answers, so runs last through
the storm. DBOS and helix share URL.
"""

from __future__ import annotations

import json
import sys
import time

import psycopg
from dbos import DBOS
from pydantic import BaseModel

from helix_dbos import DBOSAgentExecutor, MockLLMAdapter, ToolContext, dbos_config, define_agent, define_tool, shutdown
from helix_dbos._client.launcher import launch_dbos
from helix_dbos._database import libpq_url
from helix_dbos._store.retry import retry_transient
from helix_dbos.types import AssistantMessage, Message, StepResult, TextStepResult, ToolCallsStepResult, ToolSpec

URL, COUNT = sys.argv[1], int(sys.argv[2])


class Note(BaseModel):
    text: str


def note(args: Note, ctx: ToolContext) -> dict[str, str]:
    def write() -> None:
        with psycopg.connect(libpq_url(URL), autocommit=True) as conn:
            conn.execute("INSERT INTO storm.ledger (session_id, call_id) VALUES (%s, %s)", (ctx.session_id, ctx.tool_call_id))

    retry_transient(write)
    time.sleep(0.3)
    return {"noted": args.text}


def respond(messages: list[Message], tools: list[ToolSpec]) -> StepResult:
    step = sum(isinstance(m, AssistantMessage) for m in messages) + 1
    if step <= 3:
        return ToolCallsStepResult(tool_calls=[{"id": f"n{step}a", "name": "note", "arguments": {"text": "a"}},
                                               {"id": f"n{step}b", "name": "note", "arguments": {"text": "b"}}])
    return TextStepResult(content="noted", stop_reason="end_turn")


agent = define_agent("storm", system_prompt="Note.", tools=[define_tool("note", "Note.", Note, note)])
DBOS(config=dbos_config(URL, name="storm-app", notification_listener_polling_interval_sec=0.05))  # type: ignore[arg-type]
executor = DBOSAgentExecutor(llm=MockLLMAdapter(respond, delay_seconds=0.05), database_url=URL)
executor.register(agent)

if __name__ == "__main__":
    launch_dbos()
    handles = [executor.execute(agent, "go", session_id=f"storm-{i}") for i in range(COUNT)]
    print("started", flush=True)
    results = {h.session_id: h.result(timeout=240).status for h in handles}
    print(json.dumps(results), flush=True)
    shutdown()
