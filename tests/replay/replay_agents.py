"""The agents of the replay test, as a user's app module: one release runs them and is
cut off (``scripts/record_replay_fixtures.py``), the next resumes them
(``tests/replay/test_replay.py``). Both run ``helix-dbos worker --app replay_agents:make_executor``
with this directory on ``PYTHONPATH`` and the database in ``$HELIX_REPLAY_URL``; importing
the module configures nothing (the recorder and the test read its scenarios).

Every release's fixtures are resumed with this module, so a scenario, once recorded,
never changes what it does: add a new agent for a new case.

Each agent is one scenario (its model is a script in :data:`SCRIPTS`), and each runs in
exactly one session, named after it:

``approval``  step 1 looks a topic up; step 2 asks to publish twice (both need approval:
              the recorder approves one and denies the other); then it sums up.
``client``    step 1 asks the user (a client-executed tool) and looks a topic up, in
              parallel; then it answers with the user's reply.
``crash``     step 1 looks a topic up; step 2 looks another up and runs ``long_job`` in
              parallel; then it sums up. The recorder kills the worker inside ``long_job``.
``parent``    step 1 calls the sub-agent ``replay-child``, which runs ``long_job`` (killed
              inside it) and then answers; then the parent passes the child's answer on.
``done``      looks the run's message up, then answers; the same for each later message.

The model answers from the transcript alone (the agent's system prompt and the number of
assistant messages so far), with tool call ids made from both, so a resumed run gets the
answer the cut-off one would have had. Tools and model calls write to the ``replay``
schema (:data:`LEDGER_SQL`), which the fixtures keep: ``replay.calls`` holds a ``start``
and an ``end`` row per tool execution and a ``call`` row per model call, so the test can
tell what ran twice. ``long_job`` waits until the ``long_job`` row of ``replay.gates`` is
open: the recorder keeps it shut to hold the job in flight when it kills the worker.
"""

from __future__ import annotations

import os
import time
from typing import Any

import psycopg
from dbos import DBOS
from pydantic import BaseModel

import helix_dbos
from helix_dbos import (
    AgentConfig,
    DBOSAgentExecutor,
    MockLLMAdapter,
    ToolContext,
    create_sub_agent_tool,
    dbos_config,
    define_agent,
    define_tool,
    tool,
)
from helix_dbos._database import libpq_url
from helix_dbos.types import (
    AssistantMessage,
    Message,
    ParsedToolCall,
    StepResult,
    SystemMessage,
    TextStepResult,
    ToolCallsStepResult,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
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

USER_MESSAGE = "<the run's message>"


def results_text(messages: list[Message]) -> str:
    """The tool results since the last assistant message, in order."""
    results: list[str] = []
    for message in reversed(messages):
        if not isinstance(message, ToolResultMessage):
            break
        results.insert(0, f"{message.tool_name}{' (error)' if message.is_error else ''}: {message.content}")
    return "; ".join(results)


SCRIPTS: dict[str, list[list[tuple[str, dict[str, Any]]]]] = {
    "approval": [
        [("lookup", {"topic": "release notes"})],
        [("publish", {"text": "the release notes"}), ("publish", {"text": "a draft nobody wants"})],
    ],
    "client": [[("ask_user", {"question": "Which color?"}), ("lookup", {"topic": "colors"})]],
    "crash": [
        [("lookup", {"topic": "the plan"})],
        [("lookup", {"topic": "the risks"}), ("long_job", {"label": "the build"})],
    ],
    "parent": [[("subagent__replay-child", {"input": "build it"})]],
    "child": [[("long_job", {"label": "the child's build"})]],
    "done": [[("lookup", {"topic": USER_MESSAGE})]],
}
"""Each agent's model, by its system prompt: the tool calls of each step (``USER_MESSAGE``
stands for the run's message), then a text that quotes the last step's results. A script
starts again at each new message of its session."""


def respond(messages: list[Message], tools: list[ToolSpec]) -> StepResult:
    """The scripted model: the agent's script at the step the run is at."""
    prompt = str(next(m.content for m in messages if isinstance(m, SystemMessage)))
    record("llm", f"{prompt}/{len(messages)}", "call")
    steps = SCRIPTS[prompt]
    last_user = max(i for i, m in enumerate(messages) if isinstance(m, UserMessage))
    step = sum(isinstance(m, AssistantMessage) for m in messages[last_user:])
    if step == len(steps):
        return TextStepResult(content=f"{prompt} done: {results_text(messages)}", should_stop=True)
    offset = sum(isinstance(m, AssistantMessage) for m in messages)
    return ToolCallsStepResult(tool_calls=[
        ParsedToolCall(id=f"{prompt}-{offset}-{index}", name=name, arguments={
            key: messages[last_user].content if value == USER_MESSAGE else value for key, value in arguments.items()
        })
        for index, (name, arguments) in enumerate(steps[step])
    ])


# --- the app ------------------------------------------------------------------------------

def scenario(name: str, *tools: Any) -> AgentConfig:
    """The agent ``replay-<name>``, whose system prompt names its script."""
    return define_agent(name=f"replay-{name}", system_prompt=name, tools=list(tools))


ROOTS = {
    "approval": scenario("approval", lookup, publish),
    "client": scenario("client", ask_user, lookup),
    "crash": scenario("crash", lookup, long_job),
    "parent": scenario("parent", create_sub_agent_tool(scenario("child", long_job))),
    "done": scenario("done", lookup),
}
"""The scenarios' root agents, by the session each runs in."""


def make_executor() -> DBOSAgentExecutor:
    """DBOS configured on ``$HELIX_REPLAY_URL`` and the executor with the scenarios' agents
    (the worker launches)."""
    url = os.environ[URL_VAR]
    DBOS(config=dbos_config(url, name=APP_NAME, version=APP_VERSION,  # type: ignore[arg-type]
                            notification_listener_polling_interval_sec=0.05))
    executor = DBOSAgentExecutor(llm=MockLLMAdapter(responder=respond), database_url=url)
    executor.register(*ROOTS.values())
    return executor
