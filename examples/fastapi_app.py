"""A FastAPI + DBOS app that serves helix agents over HTTP next to its own routes
(``pip install -e ".[examples]"`` installs what it needs).

    HELIX_DATABASE_URL=postgresql://postgres@127.0.0.1:5432/app HELIX_EXAMPLE_TOKEN=s3cret \\
        uvicorn fastapi_app:app --app-dir examples --port 8000

    curl -s -X POST localhost:8000/agents/start -H 'Authorization: Bearer s3cret' \\
        -H 'Content-Type: application/json' -d '{"agent": "demo-researcher", "input": "Why DBOS?"}'
    curl -sN 'localhost:8000/agents/sse?session_id=<id>' -H 'Authorization: Bearer s3cret'
    curl -s -X POST 'localhost:8000/brief?topic=durable%20agents'

The agents' routes are mounted under ``/agents`` behind a bearer token; ``/brief`` is one of
the app's own routes, whose DBOS workflow starts the agent as a durable child. The model is
``$HELIX_EXAMPLE_MODEL`` (a litellm model name) or, without it, the demo's scripted one.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from dbos import DBOS
from fastapi import FastAPI
from starlette.requests import Request

import helix_dbos
from helix_dbos import DBOSAgentExecutor, LiteLLMAdapter, MockLLMAdapter, dbos_config
from helix_dbos.demo import research_agent, scripted_research
from helix_dbos.server import create_app

URL = os.environ["HELIX_DATABASE_URL"]
MODEL = os.environ.get("HELIX_EXAMPLE_MODEL")
TOKENS = {os.environ.get("HELIX_EXAMPLE_TOKEN", "dev-token"): "operator"}

DBOS(config=dbos_config(URL, name="fastapi-example"))
executor = DBOSAgentExecutor(llm=LiteLLMAdapter() if MODEL else MockLLMAdapter(scripted_research), database_url=URL)
researcher = research_agent(MODEL)
executor.register(researcher)


@DBOS.workflow()
def brief(topic: str) -> dict[str, Any]:
    """The app's own workflow: the agent runs as its durable child; a crash resumes both."""
    return executor.execute(researcher, f"Research {topic}").result().output  # type: ignore[no-any-return]


def authenticate(request: Request) -> str | None:
    """Who calls the agents' routes: the name behind the bearer token, or None (401)."""
    return TOKENS.get(request.headers.get("authorization", "").removeprefix("Bearer "))


@asynccontextmanager
async def lifespan(_: FastAPI) -> AsyncIterator[None]:
    DBOS.launch()
    yield
    await helix_dbos.shutdown_async()  # Ctrl-C, SIGTERM: runs in flight finish or are handed back; the lease is released
    await executor.close_async()


app = FastAPI(lifespan=lifespan)
app.mount("/agents", create_app(executor, authenticate=authenticate))


@app.post("/brief")
def post_brief(topic: str) -> dict[str, Any]:
    return brief(topic)
