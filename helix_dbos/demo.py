"""``helix-dbos demo``: a research agent run end to end, printed step by step.

By default the model is scripted (no key, no network): it searches twice in parallel,
saves notes to the agent's state, remembers what it learned (agent memory, committed with
its step), then finishes with a structured report. A second question, in a new session,
recalls that memory: the agent answers from what it remembered. With
``--model openai/gpt-4o-mini`` (and the provider's key in the environment) a real
model drives the same agent.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field

from helix_dbos.agents import AgentConfig, define_agent
from helix_dbos.memory import memory_tools
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
from helix_dbos.types import (
    AssistantMessage, Message, ParsedToolCall, ToolCallsStepResult, ToolResultMessage, ToolSpec, UserMessage,
)

CORPUS = {
    "dbos": "DBOS checkpoints each workflow step in Postgres, so a crashed workflow resumes where it stopped.",
    "postgres": "Postgres commits a transaction atomically: all of its writes become visible, or none does.",
    "agents": "An agent loop calls a model, runs the tools it asks for, and feeds the results back.",
}


MEMORY_NAMESPACE = ("demo", "researcher")
"""Where the demo's agent remembers what it learned."""
LEARNED = "DBOS resumes a crashed agent run from its last checkpoint in Postgres."
FOLLOW_UP = "What did you learn last time?"
"""The demo's second question: the scripted model recalls its memory to answer it."""


class ResearchState(BaseModel):
    """The research agent's state: its notes and how many searches it made."""
    notes: list[str] = Field(default_factory=list)
    searches: int = 0


class Report(BaseModel):
    """The research agent's output: a summary and the topics it drew on."""
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
    """The scripted model: search twice in parallel, save two notes and remember what it
    learned, then finish; asked :data:`FOLLOW_UP`, recall that and answer with it.

    Args:
        messages: The conversation so far.
        tools: The offered tools (unused).

    Returns:
        The next step's tool calls.
    """
    step = sum(isinstance(m, AssistantMessage) for m in messages) + 1
    if any(isinstance(m, UserMessage) and m.content == FOLLOW_UP for m in messages):
        return _scripted_follow_up(messages, step)
    calls: list[tuple[str, str, dict[str, Any]]]
    if step == 1:
        calls = [("s1", "search", {"query": "How does DBOS recover?"}), ("s2", "search", {"query": "Postgres atomicity"})]
    elif step == 2:
        calls = [
            ("n1", "save_note", {"text": CORPUS["dbos"]}), ("n2", "save_note", {"text": CORPUS["postgres"]}),
            ("m1", "remember", {"text": LEARNED, "key": "dbos-recovery"}),
        ]
    else:
        summary = "Agent runs survive crashes because each step is a DBOS checkpoint committed atomically in Postgres."
        calls = [("done", "__finish__", {"summary": summary, "sources": ["dbos", "postgres"]})]
    return ToolCallsStepResult(tool_calls=[ParsedToolCall(id=i, name=n, arguments=a) for i, n, a in calls])


def _scripted_follow_up(messages: list[Message], step: int) -> ToolCallsStepResult:
    """Recall what the first question taught, then report it."""
    if step == 1:
        calls: list[tuple[str, str, dict[str, Any]]] = [("r1", "recall", {"query": "how does DBOS recover a crashed run"})]
    else:
        recalled = next(m for m in reversed(messages) if isinstance(m, ToolResultMessage))
        texts = [m["text"] for m in json.loads(str(recalled.content)).get("memories", [])]
        summary = "I remembered: " + (" ".join(texts) if texts else "nothing yet.")
        calls = [("done", "__finish__", {"summary": summary, "sources": ["memory"]})]
    return ToolCallsStepResult(tool_calls=[ParsedToolCall(id=i, name=n, arguments=a) for i, n, a in calls])


def research_agent(model: str | None = None) -> AgentConfig:
    """The demo's research agent: it searches, saves notes, then reports.

    Args:
        model: A litellm model string; None for the scripted model.

    Returns:
        The agent.
    """
    return define_agent(
        name="demo-researcher",
        system_prompt="You research a question with the search tool, save notes, remember what you learn"
        " (and recall what you learned before), then report.",
        tools=[search, save_note, *memory_tools(namespace=MEMORY_NAMESPACE)],
        state_schema=ResearchState,
        output_schema=Report,
        llm_config=model or "scripted",
        max_steps=8,
    )


def describe(record: EventRecord | DeltaRecord) -> str | None:
    """One line for an item of the stream (None for a token delta, and for the events not
    worth a line).

    Args:
        record: An item of the session's stream.

    Returns:
        The line, or None.
    """
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
