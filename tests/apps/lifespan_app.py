"""The app module of the async shutdown tests: a FastAPI app whose lifespan ends as the
docs say, serving the agent routes under ``/agents``. DBOS on ``$HELIX_SERVER_APP_URL``;
one agent, ``slow-worker``, whose tool ``slow`` writes a file in ``$HELIX_LIFESPAN_MARKS``
each time a body starts (``<n>-<pid>``) and, the first time, sleeps ``$HELIX_SLOW_SECONDS``
(default: far longer than the drain's ``$HELIX_DRAIN_TIMEOUT``, 2 s), so the run is in
flight when the app stops. ``$HELIX_SHUTDOWN`` says how the lifespan ends: ``async``
(``await helix_dbos.shutdown_async(...)``, the documented way) or ``sync``
(``helix_dbos.shutdown(...)`` called on the event loop).

    uvicorn lifespan_app:app --app-dir tests/apps
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from dbos import DBOS
from fastapi import FastAPI
from pydantic import BaseModel

import helix_dbos
from helix_dbos import DBOSAgentExecutor, MockLLMAdapter, ToolContext, dbos_config, define_agent, define_tool
from helix_dbos.server import create_app
from helix_dbos.types import Message, ToolResultMessage, ToolSpec

URL = os.environ["HELIX_SERVER_APP_URL"]
MARKS = Path(os.environ["HELIX_LIFESPAN_MARKS"])
DRAIN_TIMEOUT = float(os.environ.get("HELIX_DRAIN_TIMEOUT", "2"))
SLOW_SECONDS = float(os.environ.get("HELIX_SLOW_SECONDS", "120"))


class NoInput(BaseModel):
    pass


def slow(args: NoInput, ctx: ToolContext) -> dict[str, Any]:
    started = len(list(MARKS.iterdir()))
    (MARKS / f"{started}-{os.getpid()}").touch()
    if started == 0:
        time.sleep(SLOW_SECONDS)
    return {"done_by": os.getpid()}


def model(messages: list[Message], tools: list[ToolSpec]) -> dict[str, Any]:
    if isinstance(messages[-1], ToolResultMessage):
        return {"type": "text", "content": f"finished: {messages[-1].content}"}
    return {"type": "tool_calls", "tool_calls": [{"id": "slow-1", "name": "slow", "arguments": {}}]}


DBOS(config=dbos_config(URL, name="helix-lifespan-app", notification_listener_polling_interval_sec=0.01))
executor = DBOSAgentExecutor(llm=MockLLMAdapter(model), database_url=URL)
executor.register(define_agent("slow-worker", tools=[define_tool("slow", "Takes its time.", NoInput, slow)]))


@asynccontextmanager
async def lifespan(_: FastAPI) -> AsyncIterator[None]:
    DBOS.launch()
    yield
    if os.environ.get("HELIX_SHUTDOWN", "async") == "async":
        await helix_dbos.shutdown_async(drain_timeout=DRAIN_TIMEOUT)
    else:
        helix_dbos.shutdown(drain_timeout=DRAIN_TIMEOUT)
    await executor.close_async()


app = FastAPI(lifespan=lifespan)
app.mount("/agents", create_app(executor, allow_unauthenticated=True))
