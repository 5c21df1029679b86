"""The app module of the hung-tool worker test: ``helix-dbos worker --app hung_app:executor``.

``hung-agent`` calls ``hang`` once, then answers. ``hang`` never returns and ignores
its abort signal (it touches ``$HELIX_HUNG_DIR/entered`` first); its timeout is
``$HELIX_HUNG_TIMEOUT`` seconds. The database URL comes from ``$HELIX_HUNG_URL``.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from dbos import DBOS

from helix_dbos import DBOSAgentExecutor, MockLLMAdapter, define_agent, tool
from helix_dbos._client.launcher import dbos_config
from helix_dbos.types import AssistantMessage, Message, StepResult, TextStepResult, ToolCallsStepResult, ToolSpec

URL = os.environ["HELIX_HUNG_URL"]
MARKS = Path(os.environ["HELIX_HUNG_DIR"])


@tool(timeout=float(os.environ["HELIX_HUNG_TIMEOUT"]))
def hang() -> dict:
    """Never returns."""
    (MARKS / "entered").touch()
    threading.Event().wait()
    return {}


def respond(messages: list[Message], tools: list[ToolSpec]) -> StepResult:
    if any(isinstance(m, AssistantMessage) for m in messages):
        return TextStepResult(content="done")
    return ToolCallsStepResult(tool_calls=[{"id": "h1", "name": "hang", "arguments": {}}])


hung_agent = define_agent(name="hung-agent", system_prompt="Hang.", tools=[hang])

DBOS(config=dbos_config(URL, name="helix-hung", notification_listener_polling_interval_sec=0.01))
executor = DBOSAgentExecutor(llm=MockLLMAdapter(responder=respond), database_url=URL)
executor.register(hung_agent)
