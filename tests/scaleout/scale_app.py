"""The app module the scale-out tests run ``helix-dbos worker --app scale_app:executor`` on.

It creates DBOS and the executor and registers the agents, and does not launch (the
worker does). The database URL comes from ``$HELIX_SCALEOUT_URL``.

``scale-agent``: step 1 calls ``work`` (which records its (session, pid, start, end)
interval in ``scaleout.intervals`` (the test creates it) and sleeps ``$HELIX_SCALEOUT_WORK_SECONDS``), step 2
calls ``__finish__``. The model is keyed on the transcript, so a recovered run answers
as the killed one would have.

``gated-agent``: step 1 calls ``publish``, which needs approval; step 2 finishes.
``deadline-agent``: the same with ``publish_soon``, whose approval times out after
``$HELIX_SCALEOUT_APPROVAL_TIMEOUT`` seconds (default 1.5).
"""

from __future__ import annotations

import os
import time

import psycopg
from dbos import DBOS
from pydantic import BaseModel

from helix_dbos import DBOSAgentExecutor, MockLLMAdapter, define_agent, tool
from helix_dbos.database import libpq_url
from helix_dbos.client.launcher import dbos_config
from helix_dbos.types import AssistantMessage, Message, ToolCallsStepResult, ToolSpec

URL = os.environ["HELIX_SCALEOUT_URL"]
WORK_SECONDS = float(os.environ.get("HELIX_SCALEOUT_WORK_SECONDS", "0.3"))
APPROVAL_TIMEOUT = float(os.environ.get("HELIX_SCALEOUT_APPROVAL_TIMEOUT", "1.5"))



class Done(BaseModel):
    ok: bool


@tool
def work(session: str) -> dict:
    """Do some work for a session (records when it ran)."""
    with psycopg.connect(libpq_url(URL), autocommit=True) as conn:
        row = conn.execute(
            "INSERT INTO scaleout.intervals (session_id, pid, started) VALUES (%s, %s, %s) RETURNING id",
            (session, os.getpid(), time.time()),
        ).fetchone()
        time.sleep(WORK_SECONDS)
        conn.execute("UPDATE scaleout.intervals SET ended = %s WHERE id = %s", (time.time(), row[0]))
    return {"worked": session}


@tool(require_approval=True)
def publish(text: str) -> dict:
    """Publish a text (needs approval)."""
    return {"published": text, "pid": os.getpid()}


@tool(require_approval=True, approval_timeout=APPROVAL_TIMEOUT)
def publish_soon(text: str) -> dict:
    """Publish a text (needs approval, soon)."""
    return {"published": text, "pid": os.getpid()}


def respond(messages: list[Message], tools: list[ToolSpec]) -> ToolCallsStepResult:
    step = sum(isinstance(m, AssistantMessage) for m in messages) + 1
    names = {t.name for t in tools}
    if step > 1:
        return ToolCallsStepResult(tool_calls=[{"id": "fin", "name": "__finish__", "arguments": {"ok": True}}])
    for gated in ("publish", "publish_soon"):
        if gated in names:
            return ToolCallsStepResult(tool_calls=[{"id": "pub", "name": gated, "arguments": {"text": "hello"}}])
    session = str(messages[-1].content)
    return ToolCallsStepResult(tool_calls=[{"id": "w", "name": "work", "arguments": {"session": session}}])


scale_agent = define_agent(name="scale-agent", system_prompt="Work.", tools=[work], output_schema=Done)
gated_agent = define_agent(name="gated-agent", system_prompt="Publish.", tools=[publish], output_schema=Done)
deadline_agent = define_agent(name="deadline-agent", system_prompt="Publish.", tools=[publish_soon], output_schema=Done)

DBOS(config=dbos_config(URL, name="helix-scaleout", notification_listener_polling_interval_sec=0.01))
executor = DBOSAgentExecutor(llm=MockLLMAdapter(responder=respond, delay_seconds=0.01), database_url=URL)
executor.register(scale_agent, gated_agent, deadline_agent)
