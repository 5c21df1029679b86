"""A worker process for the MCP crash test: one run whose tools come from an MCP server.

    python mcp_worker.py URL SESSION_ID EXECUTOR_ID start|recover    (HELIX_MCP_URL: the server)

The model calls ``add`` (fast), then ``slow`` (3 s, long enough to be killed in), then
answers with text. Each model call appends the tool names it was offered to
``$HELIX_CRASH_DIR/offered.jsonl``. The result is printed as one JSON line
(``crash_kit.run_one_session``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from crash_kit import run_one_session
from helix_dbos import define_agent
from helix_dbos.mcp import MCPToolset
from helix_dbos.types import AssistantMessage, Message, StepResult, TextStepResult, ToolCallsStepResult, ToolSpec

agent = define_agent(
    "mcp-crash-agent", "Add, then work slowly.", toolsets=[MCPToolset("calc", url=os.environ["HELIX_MCP_URL"])],
)


def respond(messages: list[Message], tools: list[ToolSpec]) -> StepResult:
    with open(Path(os.environ["HELIX_CRASH_DIR"]) / "offered.jsonl", "a") as offered:
        offered.write(json.dumps(sorted(t.name for t in tools)) + "\n")
    step = sum(isinstance(m, AssistantMessage) for m in messages) + 1
    if step == 1:
        return ToolCallsStepResult(tool_calls=[{"id": "c1", "name": "add", "arguments": {"a": 1, "b": 2}}])
    if step == 2:
        return ToolCallsStepResult(tool_calls=[{"id": "c2", "name": "slow", "arguments": {"label": "k", "seconds": 3}}])
    return TextStepResult(content="done")


if __name__ == "__main__":
    run_one_session(agent, respond)
