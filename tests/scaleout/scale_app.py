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
``gil-agent``: step 1 calls ``hold_gil``, which records its start in ``scaleout.intervals``
and holds the GIL for ``$HELIX_SCALEOUT_GIL_SECONDS`` (default 10) in one C call, so its
process renews no lease meanwhile; step 2 finishes. ``gil-once-agent``: the same, with
``max_worker_losses=1``, and so is ``scale-once-agent`` with ``scale-agent``.
"""

from __future__ import annotations

import ctypes
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


def started(conn: psycopg.Connection, session: str) -> int:
    """Record in ``scaleout.intervals`` that this process began a tool body for ``session``; its row's id."""
    row = conn.execute(
        "INSERT INTO scaleout.intervals (session_id, pid, started) VALUES (%s, %s, %s) RETURNING id",
        (session, os.getpid(), time.time()),
    ).fetchone()
    assert row is not None
    return int(row[0])


@tool
def work(session: str) -> dict:
    """Do some work for a session (records when it ran)."""
    with psycopg.connect(libpq_url(URL), autocommit=True) as conn:
        interval = started(conn, session)
        time.sleep(WORK_SECONDS)
        conn.execute("UPDATE scaleout.intervals SET ended = %s WHERE id = %s", (time.time(), interval))
    return {"worked": session}


@tool(require_approval=True)
def publish(text: str) -> dict:
    """Publish a text (needs approval)."""
    return {"published": text, "pid": os.getpid()}


@tool(require_approval=True, approval_timeout=APPROVAL_TIMEOUT)
def publish_soon(text: str) -> dict:
    """Publish a text (needs approval, soon)."""
    return {"published": text, "pid": os.getpid()}


GIL_SECONDS = int(os.environ.get("HELIX_SCALEOUT_GIL_SECONDS", "10"))


@tool
def hold_gil(session: str) -> dict:
    """Hold the GIL in one C call (records that it started, in ``scaleout.intervals``)."""
    with psycopg.connect(libpq_url(URL), autocommit=True) as conn:
        interval = started(conn, session)
        # libc's sleep through a PyDLL keeps the GIL, as a long regex match does: no other
        # thread of this process (the lease's renewals included) runs until it returns.
        ctypes.PyDLL(None).sleep(GIL_SECONDS)
        conn.execute("UPDATE scaleout.intervals SET ended = %s WHERE id = %s", (time.time(), interval))
    return {"held": session}


CHAOS_STEPS = 5


def chaos_seconds(session: str, step: int) -> float:
    """How long step ``step`` of a chaos session's tool takes: 0.1 to 2 s, the same in every run."""
    digest = hashlib.sha256(f"{session}:{step}".encode()).digest()
    return 0.1 + 1.9 * digest[0] / 255


@tool
def chaos_work(session: str, step: int) -> dict:
    """Work for a while on one step of a session (records when it ran, in ``scaleout.intervals``)."""
    with psycopg.connect(libpq_url(URL), autocommit=True) as conn:
        interval = started(conn, f"{session}:{step}")
        time.sleep(chaos_seconds(session, step))
        conn.execute("UPDATE scaleout.intervals SET ended = %s WHERE id = %s", (time.time(), interval))
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
    if "hold_gil" in names:
        session = str(messages[-1].content)
        return ToolCallsStepResult(tool_calls=[{"id": "gil", "name": "hold_gil", "arguments": {"session": session}}])
    for gated in ("publish", "publish_soon"):
        if gated in names:
            return ToolCallsStepResult(tool_calls=[{"id": "pub", "name": gated, "arguments": {"text": "hello"}}])
    session = str(messages[-1].content)
    return ToolCallsStepResult(tool_calls=[{"id": "w", "name": "work", "arguments": {"session": session}}])


scale_agent = define_agent(name="scale-agent", system_prompt="Work.", tools=[work], output_schema=Done)
gated_agent = define_agent(name="gated-agent", system_prompt="Publish.", tools=[publish], output_schema=Done)
chaos_agent = define_agent(name="chaos-agent", system_prompt="Work in steps.", tools=[chaos_work], output_schema=Done,
                           max_steps=CHAOS_STEPS + 1, max_worker_losses=10)  # the chaos test kills workers on purpose
scale_once_agent = define_agent(name="scale-once-agent", system_prompt="Work.", tools=[work], output_schema=Done,
                                max_worker_losses=1)
gil_agent = define_agent(name="gil-agent", system_prompt="Hold on.", tools=[hold_gil], output_schema=Done)
gil_once_agent = define_agent(name="gil-once-agent", system_prompt="Hold on.", tools=[hold_gil], output_schema=Done,
                              max_worker_losses=1)
deadline_agent = define_agent(name="deadline-agent", system_prompt="Publish.", tools=[publish_soon], output_schema=Done)

DBOS(config=dbos_config(URL, name="helix-scaleout", version=os.environ.get("HELIX_SCALEOUT_VERSION", "1"),
                        notification_listener_polling_interval_sec=0.01, sys_db_pool_size=8))
executor = DBOSAgentExecutor(llm=MockLLMAdapter(responder=respond, delay_seconds=0.01), database_url=URL)
executor.register(scale_agent, gated_agent, deadline_agent, chaos_agent, gil_agent, gil_once_agent,
                  scale_once_agent)
