"""A user's script using helix_dbos's public API; mypy --strict must see real types."""

from __future__ import annotations

from pydantic import BaseModel

from helix_dbos import (
    AgentHandle,
    AgentResult,
    DBOSAgentExecutor,
    MockLLMAdapter,
    SessionRecord,
    TextStepResult,
    ToolContext,
    define_agent,
    tool,
)
from helix_dbos import admin


class Query(BaseModel):
    text: str


@tool
def search(query: Query, ctx: ToolContext) -> str:
    """Search."""
    return query.text


def answer(messages: object, tools: object) -> TextStepResult:
    return TextStepResult(content="ok")


def main(url: str) -> str:
    agent = define_agent(name="typed", system_prompt="Answer.", tools=[search])
    executor = DBOSAgentExecutor(llm=MockLLMAdapter(responder=answer), database_url=url)
    handle: AgentHandle = executor.execute(agent, "hi")
    result: AgentResult = handle.result(timeout=30)
    session: SessionRecord = executor.get_session(handle.session_id)
    listed: list[SessionRecord] = admin.list_sessions(url)
    return f"{result.status} {session.step_count} {len(listed)}"
