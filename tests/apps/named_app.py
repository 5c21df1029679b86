"""A user's app module for the version and database tests: its DBOS application name comes
from ``$HELIX_APP_NAME``, its DBOS system database from ``$HELIX_APP_SYSTEM_URL`` and helix's
from ``$HELIX_APP_URL`` (the same URL unless a test wants them apart).

    python named_app.py SESSION_ID         # launch, run one agent, print its result as JSON
    python named_app.py --gated SESSION_ID # launch, start an approval-gated run, print "waiting", block
    helix-dbos worker --app named_app:executor

``$HELIX_APP_VERSION``, when set, is the raw DBOS application_version (to provoke a collision).
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid

from dbos import DBOS

from helix_dbos import DBOSAgentExecutor, MockLLMAdapter, dbos_config, define_agent, shutdown, tool
from helix_dbos._client.launcher import launch_dbos
from helix_dbos.types import AssistantMessage, Message, StepResult, TextStepResult, ToolCallsStepResult, ToolSpec

NAME = os.environ["HELIX_APP_NAME"]
URL = os.environ["HELIX_APP_URL"]
SYSTEM_URL = os.environ.get("HELIX_APP_SYSTEM_URL", URL)
VERSION = {"application_version": os.environ["HELIX_APP_VERSION"]} if os.environ.get("HELIX_APP_VERSION") else {}



@tool(require_approval=True)
def publish(text: str) -> dict[str, object]:
    """Publish a text (needs approval)."""
    return {"published": text, "by": os.environ.get("HELIX_APP_VERSION", NAME)}


def respond(messages: list[Message], tools: list[ToolSpec]) -> StepResult:
    if tools and not any(isinstance(m, AssistantMessage) for m in messages):
        call_id = f"p-{uuid.uuid4().hex[:8]}"  # as real providers do; helix needs ids unique per session
        return ToolCallsStepResult(tool_calls=[{"id": call_id, "name": "publish", "arguments": {"text": "news"}}])
    return TextStepResult(content=f"{NAME} says hi", stop_reason="end_turn")


echo = define_agent(f"{NAME}-echo", system_prompt="Echo.")
gated = define_agent(f"{NAME}-gated", system_prompt="Publish.", tools=[publish])
DBOS(config=dbos_config(SYSTEM_URL, name=NAME, **VERSION))  # type: ignore[arg-type]
executor = DBOSAgentExecutor(llm=MockLLMAdapter(respond), database_url=URL)
executor.register(echo, gated)

if __name__ == "__main__":
    launch_dbos()
    if sys.argv[1] == "--gated":
        executor.execute(gated, "publish the news", session_id=sys.argv[2])
        while not executor.list_pending(sys.argv[2]):
            time.sleep(0.05)
        print("waiting", flush=True)
        time.sleep(600)
    result = executor.execute(echo, "hi", session_id=sys.argv[1]).result(timeout=60)
    print(json.dumps(result.model_dump(mode="json")), flush=True)
    shutdown()
