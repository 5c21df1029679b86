"""The app module of the chat crash test: DBOS on ``$HELIX_SERVER_APP_URL`` and one agent,
``chat-weather``, whose scripted model calls a tool, then streams a long answer slowly
(so a worker can be killed mid-answer). ``scripts/bench_chat.py`` serves it too.

    helix-dbos serve --app chat_app:executor --allow-unauthenticated
"""

from __future__ import annotations

import os

from dbos import DBOS
from pydantic import BaseModel

from helix_dbos import DBOSAgentExecutor, MockLLMAdapter, ToolContext, dbos_config, define_agent, define_tool
from helix_dbos.types import AssistantMessage, UserMessage

URL = os.environ["HELIX_SERVER_APP_URL"]
ANSWER = " ".join(f"word{n}" for n in range(60))


class City(BaseModel):
    city: str


def weather(args: City, ctx: ToolContext) -> dict:
    return {"city": args.city, "temp_c": 22}


def model(messages, tools):
    """A tool call, then the long answer (at once for a question that begins "Just answer")."""
    asked = next(m.content for m in messages if isinstance(m, UserMessage))
    if sum(isinstance(m, AssistantMessage) for m in messages) == 0 and not asked.startswith("Just answer"):
        return {"type": "tool_calls", "tool_calls": [{"id": "w1", "name": "weather", "arguments": {"city": "Oslo"}}]}
    return {"type": "text", "content": ANSWER}


DBOS(config=dbos_config(URL, name="helix-chat-app", notification_listener_polling_interval_sec=0.01))
executor = DBOSAgentExecutor(llm=MockLLMAdapter(model, stream_chunk_chars=4, delta_delay_seconds=0.04), database_url=URL)
executor.register(define_agent("chat-weather", tools=[define_tool("weather", "The weather.", City, weather)]))
