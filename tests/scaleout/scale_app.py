"""The app module the scale-out tests run ``helix-dbos worker --app scale_app:executor`` on.

It creates DBOS and the executor and registers the agents, and does not launch (the
worker does). The database URL comes from ``$HELIX_SCALEOUT_URL``, the app's version
from ``$HELIX_SCALEOUT_VERSION`` (default 1).

``scale-agent``: step 1 calls ``work`` (which records its (session, pid, start, end)
interval in ``scaleout.intervals`` (the test creates it) and sleeps ``$HELIX_SCALEOUT_WORK_SECONDS``), step 2
calls ``__finish__``. The model is keyed on the transcript, so a recovered run answers
as the killed one would have.

``gated-agent``: step 1 calls ``publish``, which needs approval; step 2 finishes.
``chaos-agent``: steps 1 to 4 call ``chaos_work`` (0.1 to 2 s, fixed by session and
step, recorded in ``scaleout.intervals`` as ``<session>:<step>``), step 5 finishes.
``deadline-agent``: the same with ``publish_soon``, whose approval times out after
``$HELIX_SCALEOUT_APPROVAL_TIMEOUT`` seconds (default 1.5).
"""

from __future__ import annotations

import hashlib
import os
import time

import psycopg
from dbos import DBOS
from pydantic import BaseModel

from helix_dbos import DBOSAgentExecutor, MockLLMAdapter, define_agent, tool
from helix_dbos._database import libpq_url
from helix_dbos._client.launcher import dbos_config
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


CHAOS_STEPS = 5


def chaos_seconds(session: str, step: int) -> float:
    """How long step ``step`` of a chaos session's tool takes: 0.1 to 2 s, the same in every run."""
    digest = hashlib.sha256(f"{session}:{step}".encode()).digest()
    return 0.1 + 1.9 * digest[0] / 255


@tool
def chaos_work(session: str, step: int) -> dict:
    """Work for a while on one step of a session (records when it ran, in ``scaleout.intervals``)."""
    with psycopg.connect(libpq_url(URL), autocommit=True) as conn:
        row = conn.execute(
            "INSERT INTO scaleout.intervals (session_id, pid, started) VALUES (%s, %s, %s) RETURNING id",
            (f"{session}:{step}", os.getpid(), time.time()),
        ).fetchone()
        time.sleep(chaos_seconds(session, step))
        conn.execute("UPDATE scaleout.intervals SET ended = %s WHERE id = %s", (time.time(), row[0]))
    return {"session": session, "step": step}


def respond(messages: list[Message], tools: list[ToolSpec]) -> ToolCallsStepResult:
    step = sum(isinstance(m, AssistantMessage) for m in messages) + 1
    names = {t.name for t in tools}
    if "chaos_work" in names:
        if step == CHAOS_STEPS:
            return ToolCallsStepResult(tool_calls=[{"id": "fin", "name": "__finish__", "arguments": {"ok": True}}])
        session = str(next(m.content for m in messages if m.role == "user"))
        return ToolCallsStepResult(
            tool_calls=[{"id": f"c{step}", "name": "chaos_work", "arguments": {"session": session, "step": step}}])
    if step > 1:
        return ToolCallsStepResult(tool_calls=[{"id": "fin", "name": "__finish__", "arguments": {"ok": True}}])
    for gated in ("publish", "publish_soon"):
        if gated in names:
            return ToolCallsStepResult(tool_calls=[{"id": "pub", "name": gated, "arguments": {"text": "hello"}}])
    session = str(messages[-1].content)
    return ToolCallsStepResult(tool_calls=[{"id": "w", "name": "work", "arguments": {"session": session}}])


scale_agent = define_agent(name="scale-agent", system_prompt="Work.", tools=[work], output_schema=Done)
gated_agent = define_agent(name="gated-agent", system_prompt="Publish.", tools=[publish], output_schema=Done)
chaos_agent = define_agent(name="chaos-agent", system_prompt="Work in steps.", tools=[chaos_work], output_schema=Done,
                           max_steps=CHAOS_STEPS + 1)
deadline_agent = define_agent(name="deadline-agent", system_prompt="Publish.", tools=[publish_soon], output_schema=Done)

DBOS(config=dbos_config(URL, name="helix-scaleout", version=os.environ.get("HELIX_SCALEOUT_VERSION", "1"),
                        notification_listener_polling_interval_sec=0.01, sys_db_pool_size=8))
executor = DBOSAgentExecutor(llm=MockLLMAdapter(responder=respond, delay_seconds=0.01), database_url=URL)
executor.register(scale_agent, gated_agent, deadline_agent, chaos_agent)
