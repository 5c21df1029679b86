"""``helix-dbos demo``: a research agent run end to end, printed step by step.

By default the model is scripted (no key, no network): it searches twice in parallel,
saves notes to the agent's state, then finishes with a structured report. With
``--model openai/gpt-4o-mini`` (and the provider's key in the environment) a real
model drives the same agent.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field

from helix_dbos.agents import AgentConfig, define_agent
from helix_dbos.events import (
    ErrorEvent,
    FinishEvent,
    RunStartEvent,
    StatePatchEvent,
    StepStartEvent,
    TextEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from helix_dbos._deltas import DeltaRecord
from helix_dbos._store.records import EventRecord
from helix_dbos.tools import ToolContext, tool
from helix_dbos.types import AssistantMessage, Message, ParsedToolCall, ToolCallsStepResult, ToolSpec

CORPUS = {
    "dbos": "DBOS checkpoints each workflow step in Postgres, so a crashed workflow resumes where it stopped.",
    "postgres": "Postgres commits a transaction atomically: all of its writes become visible, or none does.",
    "agents": "An agent loop calls a model, runs the tools it asks for, and feeds the results back.",
}


class ResearchState(BaseModel):
    notes: list[str] = Field(default_factory=list)
    searches: int = 0


class Report(BaseModel):
    summary: str
    sources: list[str]


@tool
def search(query: str, ctx: ToolContext) -> dict[str, Any]:
    """Search the (tiny, built-in) corpus for a topic."""
    hits = {topic: text for topic, text in CORPUS.items() if topic in query.lower()}
    ctx.update_state(lambda draft: setattr(draft, "searches", draft.searches + 1))
    return {"query": query, "results": hits}


@tool
def save_note(text: str, ctx: ToolContext) -> dict[str, Any]:
    """Save a research note in the agent's state."""
    ctx.update_state(lambda draft: draft.notes.append(text))
    return {"saved": True}


def scripted_research(messages: list[Message], tools: list[ToolSpec]) -> ToolCallsStepResult:
    """The scripted model: search twice in parallel, save two notes, then finish."""
    step = sum(isinstance(m, AssistantMessage) for m in messages) + 1
    calls: list[tuple[str, str, dict[str, Any]]]
    if step == 1:
        calls = [("s1", "search", {"query": "How does DBOS recover?"}), ("s2", "search", {"query": "Postgres atomicity"})]
    elif step == 2:
        calls = [("n1", "save_note", {"text": CORPUS["dbos"]}), ("n2", "save_note", {"text": CORPUS["postgres"]})]
    else:
        summary = "Agent runs survive crashes because each step is a DBOS checkpoint committed atomically in Postgres."
        calls = [("done", "__finish__", {"summary": summary, "sources": ["dbos", "postgres"]})]
    return ToolCallsStepResult(tool_calls=[ParsedToolCall(id=i, name=n, arguments=a) for i, n, a in calls])


def research_agent(model: str | None = None) -> AgentConfig:
    return define_agent(
        name="demo-researcher",
        system_prompt="You research a question with the search tool, save notes, then report.",
        tools=[search, save_note],
        state_schema=ResearchState,
        output_schema=Report,
        llm_config=model or "scripted",
        max_steps=8,
    )


def describe(record: EventRecord | DeltaRecord) -> str | None:
    """One line for an item of the stream (None for a token delta, and for the events not
    worth a line)."""
    if isinstance(record, DeltaRecord):
        return None
    event = record.event
    if isinstance(event, RunStartEvent):
        return f"run {event.run} started: {event.input!r}"
    if isinstance(event, StepStartEvent):
        return f"-- step {event.step}"
    if isinstance(event, TextEvent):
        return f"   model: {event.content}"
    if isinstance(event, ToolCallEvent):
        return f"   call   {event.tool_name}({json.dumps(event.input)})"
    if isinstance(event, ToolResultEvent):
        return f"   result {event.tool_name}: {event.content}"
    if isinstance(event, StatePatchEvent):
        return f"   state  {json.dumps(event.patches)}"
    if isinstance(event, FinishEvent):
        return f"finished: {json.dumps(event.output, indent=2)}"
    if isinstance(event, ErrorEvent):
        return f"failed: {event.error}"
    return None
