"""The agents of the replay test, as a user's app module: one release runs them and is
cut off (``scripts/record_replay_fixtures.py``), the next resumes them
(``tests/replay/test_replay.py``). Both run ``helix-dbos worker --app replay_agents:make_executor``
with this directory on ``PYTHONPATH`` and the database in ``$HELIX_REPLAY_URL``; importing
the module configures nothing (the recorder and the test read its scenarios).

Every release's fixtures are resumed with this module, so a scenario, once recorded,
never changes what it does: add a new agent for a new case.

Each agent is one scenario, and each runs in exactly one session (named after it):

``approval``  step 0 looks a topic up; step 1 asks to publish twice (both need approval:
              the recorder approves one and denies the other); step 2 sums up.
``client``    step 0 asks the user (a client-executed tool) and looks a topic up, in parallel;
              step 1 answers with the user's reply.
``crash``     step 0 looks a topic up; step 1 looks another up and runs ``long_job`` in
              parallel; step 2 sums up. The recorder kills the worker inside ``long_job``.
``parent``    step 0 calls the sub-agent ``replay-child``, which runs ``long_job`` (killed
              inside it) and then answers; step 1 passes the child's answer on.
``done``      step 0 looks a topic up, step 1 answers; each later message does the same.

The model answers from the transcript alone (the agent's system prompt and the number of
assistant messages so far), with tool call ids made from both, so a resumed run gets the
answer the cut-off one would have had. Tools and model calls write to the ``replay``
schema (:data:`LEDGER_SQL`), which the fixtures keep: ``replay.calls`` holds a ``start``
and an ``end`` row per tool execution and a ``call`` row per model call, so the test can
tell what ran twice. ``long_job`` waits until the ``long_job`` row of ``replay.gates`` is
open: the recorder keeps it shut to hold the job in flight when it kills the worker.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import psycopg
from dbos import DBOS
from pydantic import BaseModel

import helix_dbos
from helix_dbos import (
    DBOSAgentExecutor,
    MockLLMAdapter,
    ToolContext,
    create_sub_agent_tool,
    dbos_config,
    define_agent,
    define_tool,
    tool,
)
from helix_dbos.database import libpq_url
from helix_dbos.types import (
    AssistantMessage,
    Message,
    StepResult,
    SystemMessage,
    TextStepResult,
    ToolCallsStepResult,
    ToolResultMessage,
    ToolSpec,
)

URL_VAR = "HELIX_REPLAY_URL"
APP_NAME = "helix-replay"
APP_VERSION = "1"
"""The DBOS application (``helix-replay-1+helix<protocol>``) every release runs these agents as."""

LEDGER_SQL = """
CREATE SCHEMA replay;
CREATE TABLE replay.calls (
    id bigserial PRIMARY KEY,
    kind text NOT NULL,      -- tool | llm
    key text NOT NULL,       -- tool: <session>/<tool call id>; llm: <agent>/<messages seen>
    phase text NOT NULL,     -- tool: start | end; llm: call
    release text NOT NULL,   -- helix_dbos.__version__ of the process
    pid int NOT NULL
);
CREATE TABLE replay.gates (name text PRIMARY KEY, open boolean NOT NULL);
INSERT INTO replay.gates VALUES ('long_job', false);
"""
"""The ledger the tools and the model write to (made by the recorder, kept in the fixtures)."""


def record(kind: str, key: str, phase: str) -> None:
    """One ledger row, committed at once."""
    with psycopg.connect(libpq_url(os.environ[URL_VAR]), autocommit=True) as conn:
        conn.execute(
            "INSERT INTO replay.calls (kind, key, phase, release, pid) VALUES (%s, %s, %s, %s, %s)",
            (kind, key, phase, helix_dbos.__version__, os.getpid()),
        )


def gate_open(name: str) -> bool:
    with psycopg.connect(libpq_url(os.environ[URL_VAR]), autocommit=True) as conn:
        row = conn.execute("SELECT open FROM replay.gates WHERE name = %s", (name,)).fetchone()
    return bool(row and row[0])


# --- tools ------------------------------------------------------------------------------


@tool
def lookup(topic: str, ctx: ToolContext) -> dict[str, str]:
    """Look a topic up."""
    key = f"{ctx.session_id}/{ctx.tool_call_id}"
    record("tool", key, "start")
    record("tool", key, "end")
    return {"topic": topic, "facts": f"three facts about {topic}"}


@tool
def long_job(label: str, ctx: ToolContext) -> dict[str, str]:
    """Run a long job (it waits until the ``long_job`` gate is open)."""
    key = f"{ctx.session_id}/{ctx.tool_call_id}"
    record("tool", key, "start")
    while not gate_open("long_job"):
        time.sleep(0.05)
    record("tool", key, "end")
    return {"label": label, "status": "finished"}


@tool(require_approval=True)
def publish(text: str, ctx: ToolContext) -> dict[str, str]:
    """Publish a text (needs approval)."""
    key = f"{ctx.session_id}/{ctx.tool_call_id}"
    record("tool", key, "start")
    record("tool", key, "end")
    return {"published": text}


class Question(BaseModel):
    question: str


class Reply(BaseModel):
    answer: str


ask_user = define_tool("ask_user", "Ask the user a question.", Question, "client", output_schema=Reply)


# --- the model ----------------------------------------------------------------------------


def call(scenario: str, step: int, index: int, name: str, **arguments: Any) -> dict[str, Any]:
    return {"id": f"{scenario}-{step}-{index}", "name": name, "arguments": arguments}


def results_text(messages: list[Message]) -> str:
    """The tool results since the last assistant message that asked for tools, in order."""
    results: list[str] = []
    for message in reversed(messages):
        if not isinstance(message, ToolResultMessage):
            break
        results.insert(0, f"{message.tool_name}{' (error)' if message.is_error else ''}: {message.content}")
    return "; ".join(results)


def approval(step: int, messages: list[Message]) -> StepResult:
    if step == 0:
        return ToolCallsStepResult(tool_calls=[call("approval", 0, 0, "lookup", topic="release notes")])
    if step == 1:
        facts = json.loads(messages[-1].content)["facts"]
        return ToolCallsStepResult(tool_calls=[
            call("approval", 1, 0, "publish", text=f"notes: {facts}"),
            call("approval", 1, 1, "publish", text="a draft nobody wants"),
        ])
    return TextStepResult(content=f"approval done: {results_text(messages)}", should_stop=True)


def client(step: int, messages: list[Message]) -> StepResult:
    if step == 0:
        return ToolCallsStepResult(tool_calls=[
            call("client", 0, 0, "ask_user", question="Which color?"),
            call("client", 0, 1, "lookup", topic="colors"),
        ])
    return TextStepResult(content=f"client done: {results_text(messages)}", should_stop=True)


def crash(step: int, messages: list[Message]) -> StepResult:
    if step == 0:
        return ToolCallsStepResult(tool_calls=[call("crash", 0, 0, "lookup", topic="the plan")])
    if step == 1:
        return ToolCallsStepResult(tool_calls=[
            call("crash", 1, 0, "lookup", topic="the risks"),
            call("crash", 1, 1, "long_job", label="the build"),
        ])
    return TextStepResult(content=f"crash done: {results_text(messages)}", should_stop=True)


def parent(step: int, messages: list[Message]) -> StepResult:
    if step == 0:
        return ToolCallsStepResult(tool_calls=[call("parent", 0, 0, "subagent__replay-child", input="build it")])
    return TextStepResult(content=f"parent done: {results_text(messages)}", should_stop=True)


def child(step: int, messages: list[Message]) -> StepResult:
    if step == 0:
        return ToolCallsStepResult(tool_calls=[call("child", 0, 0, "long_job", label="the child's build")])
    return TextStepResult(content=f"child done: {results_text(messages)}", should_stop=True)


def done(step: int, messages: list[Message]) -> StepResult:
    if step % 2 == 0:
        topic = str(messages[-1].content)
        return ToolCallsStepResult(tool_calls=[call("done", step, 0, "lookup", topic=topic)])
    return TextStepResult(content=f"done {step}: {results_text(messages)}", should_stop=True)


SCRIPTS = {"approval": approval, "client": client, "crash": crash, "parent": parent, "child": child, "done": done}
"""Each agent's model, by its system prompt."""


def respond(messages: list[Message], tools: list[ToolSpec]) -> StepResult:
    """The scripted model: the agent's script at the step the transcript is at."""
    prompt = str(next(m.content for m in messages if isinstance(m, SystemMessage)))
    record("llm", f"{prompt}/{len(messages)}", "call")
    step = sum(isinstance(m, AssistantMessage) for m in messages)
    return SCRIPTS[prompt](step, messages)


# --- the app ------------------------------------------------------------------------------

replay_child = define_agent(name="replay-child", system_prompt="child", tools=[long_job])
AGENTS = [
    define_agent(name="replay-approval", system_prompt="approval", tools=[lookup, publish]),
    define_agent(name="replay-client", system_prompt="client", tools=[ask_user, lookup]),
    define_agent(name="replay-crash", system_prompt="crash", tools=[lookup, long_job]),
    define_agent(name="replay-parent", system_prompt="parent", tools=[create_sub_agent_tool(replay_child)]),
    define_agent(name="replay-done", system_prompt="done", tools=[lookup]),
]
"""The scenarios' root agents; each runs in the session named by its system prompt."""



def make_executor() -> DBOSAgentExecutor:
    """DBOS configured on ``$HELIX_REPLAY_URL`` and the executor with the scenarios' agents
    (the worker launches)."""
    url = os.environ[URL_VAR]
    DBOS(config=dbos_config(url, name=APP_NAME, version=APP_VERSION, notification_listener_polling_interval_sec=0.05))
    executor = DBOSAgentExecutor(llm=MockLLMAdapter(responder=respond), database_url=url)
    executor.register(*AGENTS)
    return executor
