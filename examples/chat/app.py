"""A FastAPI + DBOS app whose React page talks to a durable agent with the AI SDK's useChat.

    examples/chat/run.sh                 # npm ci, build the page, serve http://127.0.0.1:8000

The page (``web/src/main.jsx``) uses ``useChat`` with ``DefaultChatTransport`` on
``/agents/chat``: answers stream as token deltas, a refund waits for the person's click
on Approve or Deny, and a reload resumes the answer in progress (``resume: true``). The
model is ``$HELIX_EXAMPLE_MODEL`` (a litellm model name) or, without it, a scripted one
that refunds an order and then says so. ``$HELIX_DATABASE_URL`` is the DBOS system
database (it must exist).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from dbos import DBOS
from fastapi import FastAPI
from pydantic import BaseModel
from starlette.staticfiles import StaticFiles

import helix_dbos
from helix_dbos import DBOSAgentExecutor, LiteLLMAdapter, MockLLMAdapter, ToolContext, dbos_config
from helix_dbos import define_agent, define_tool
from helix_dbos.server import create_app
from helix_dbos.types import Message, ToolResultMessage, ToolSpec

URL = os.environ["HELIX_DATABASE_URL"]
MODEL = os.environ.get("HELIX_EXAMPLE_MODEL")
WEB = Path(__file__).resolve().parent / "web"


class Refund(BaseModel):
    order_id: str
    amount: int


class Ledger(BaseModel):
    refunded: list[str] = []


def refund(args: Refund, ctx: ToolContext) -> dict[str, Any]:
    ctx.update_state(lambda draft: draft.refunded.append(args.order_id))
    return {"refunded": args.amount, "order_id": args.order_id}


def scripted(messages: list[Message], tools: list[ToolSpec]) -> dict[str, Any]:
    """Without a model: each question refunds order A-42 (the call waits for approval),
    then the answer says how it went."""
    last = messages[-1]
    if not isinstance(last, ToolResultMessage):
        call = {"id": f"refund-{len(messages)}", "name": "refund", "arguments": {"order_id": "A-42", "amount": 20}}
        return {"type": "tool_calls", "tool_calls": [call]}
    if "not approved" in str(last.content):
        return {"type": "text", "content": "Understood: order A-42 is not refunded."}
    return {"type": "text", "content": "Order A-42 is refunded: 20 EUR are on their way back to your card."}


support = define_agent(
    "support",
    system_prompt="You help customers with their orders. Refund what they ask for.",
    tools=[define_tool("refund", "Refund an order.", Refund, refund, require_approval=True)],
    state_schema=Ledger,
    **({"llm_config": MODEL} if MODEL else {}),
)

DBOS(config=dbos_config(URL, name="chat-example"))
llm = LiteLLMAdapter() if MODEL else MockLLMAdapter(scripted, stream_chunk_chars=3, delta_delay_seconds=0.03)
executor = DBOSAgentExecutor(llm=llm, database_url=URL)
executor.register(support)


@asynccontextmanager
async def lifespan(_: FastAPI) -> AsyncIterator[None]:
    DBOS.launch()
    yield
    await helix_dbos.shutdown_async()  # Ctrl-C, SIGTERM: runs in flight finish or are handed back; the lease is released
    await executor.close_async()


app = FastAPI(lifespan=lifespan)
app.mount("/agents", create_app(executor, allow_unauthenticated=True, chat_agent=support))  # add authenticate= in production
app.mount("/assets", StaticFiles(directory=WEB / "dist"))
app.mount("/", StaticFiles(directory=WEB / "public", html=True))
