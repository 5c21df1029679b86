"""A worker process for the sub-agent crash test: a parent that runs two children at once.

    python subagent_worker.py URL SESSION_ID EXECUTOR_ID start|recover LEDGER_DIR

The parent calls ``subagent__crash-child`` twice in one step (``c1`` with input ``a``,
``c2`` with input ``b``); each child calls ``slow`` once, which appends a line to
``LEDGER_DIR/ledger_<label>.txt`` and then takes 0.5 s, and answers with text; the
parent then answers with both children's outputs. ``start`` begins the run; ``recover``
only launches DBOS (same executor id), which recovers the parent and both children the
killed worker left PENDING, and waits for the parent. The model is a responder keyed on
the transcript and the offered tools, so a relaunched process answers exactly as the
killed one would have. The parent's result is printed as one JSON line.
"""

from __future__ import annotations

import json

from crash_kit import ledger_tool, run_one_session
from helix_dbos import create_sub_agent_tool, define_agent
from helix_dbos.types import (
    AssistantMessage,
    Message,
    StepResult,
    TextStepResult,
    ToolCallsStepResult,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)

TOOL_SECONDS = 0.5


slow = ledger_tool(TOOL_SECONDS)


def respond(messages: list[Message], tools: list[ToolSpec]) -> StepResult:
    step = sum(isinstance(m, AssistantMessage) for m in messages)
    results = [m for m in messages if isinstance(m, ToolResultMessage)]
    if [t.name for t in tools] == ["subagent__crash-child"]:  # the parent
        if step == 0:
            return ToolCallsStepResult(tool_calls=[
                {"id": "c1", "name": "subagent__crash-child", "arguments": {"input": "a"}},
                {"id": "c2", "name": "subagent__crash-child", "arguments": {"input": "b"}},
            ])
        return TextStepResult(content="parent: " + " | ".join(json.loads(r.content) for r in results), should_stop=True)
    label = next(m.content for m in messages if isinstance(m, UserMessage))
    if step == 0:
        return ToolCallsStepResult(tool_calls=[{"id": f"s-{label}", "name": "slow", "arguments": {"label": label}}])
    return TextStepResult(content=f"child {label} got {results[-1].content}", should_stop=True)


child = define_agent(name="crash-child", system_prompt="Work.", tools=[slow])
parent = define_agent(name="crash-parent", system_prompt="Delegate.", tools=[create_sub_agent_tool(child)])


if __name__ == "__main__":
    run_one_session(parent, respond)
