"""A program whose runs call an MCP server as two users, traced and counted in process::

    python mcp_users_program.py DATABASE_URL MCP_URL

Launches DBOS on DATABASE_URL with an in-memory span exporter (content capture on, so
spans carry tool arguments and results), runs the agent ``mcp-users`` once for ``alice``
and once for ``bob`` (each calls ``whoami`` then ``fail``); each user's bearer token comes
from ``SECRETS`` through the toolset's ``headers`` hook. Prints one JSON line: the
results, every span (name and attributes) and the ``helix_mcp_calls`` counts.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "true"

from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from prometheus_client import REGISTRY  # noqa: E402

from helix_dbos import MockLLMAdapter, define_agent, launch_standalone, shutdown  # noqa: E402
from helix_dbos.observability import register_fleet_metrics  # noqa: E402
from helix_dbos.mcp import MCPToolset  # noqa: E402
from helix_dbos.toolsets import ToolsetRun  # noqa: E402
from helix_dbos.types import AssistantMessage, Message, StepResult, TextStepResult, ToolCallsStepResult, ToolSpec  # noqa: E402

SECRETS = {"alice": "tok-alice-7d1f3c", "bob": "tok-bob-92ab44"}

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)


def headers(run: ToolsetRun) -> dict[str, str]:
    return {"Authorization": f"Bearer {SECRETS[run.owner or '']}"}


def respond(messages: list[Message], tools: list[ToolSpec]) -> StepResult:
    step = sum(isinstance(m, AssistantMessage) for m in messages)
    script: list[StepResult] = [
        ToolCallsStepResult(tool_calls=[{"id": "c1", "name": "whoami", "arguments": {}}]),
        ToolCallsStepResult(tool_calls=[{"id": "c2", "name": "fail", "arguments": {"why": "no"}}]),
        TextStepResult(content="done"),
    ]
    return script[step]


def main() -> None:
    database_url, mcp_url = sys.argv[1:3]
    agent = define_agent("mcp-users", "Call the server.", toolsets=[MCPToolset("calc", url=mcp_url, headers=headers)])
    executor = launch_standalone(MockLLMAdapter(respond), agents=[agent], database_url=database_url)
    register_fleet_metrics(database_url)  # this process reports to Prometheus, as a served app does
    results: dict[str, Any] = {}
    for owner in ("alice", "bob"):
        handle = executor.execute(agent, "go", owner=owner, session_id=f"session-{owner}")
        results[owner] = handle.result(timeout=60).status
    shutdown()
    provider.force_flush()
    spans = [{"name": s.name, "attributes": dict(s.attributes or {}),
              "events": [dict(e.attributes or {}) for e in s.events]} for s in exporter.get_finished_spans()]
    counts = {
        outcome: REGISTRY.get_sample_value("helix_mcp_calls_total", {"server": "calc", "outcome": outcome})
        for outcome in ("ok", "error")
    }
    print(json.dumps({"results": results, "spans": spans, "mcp_calls": counts}, default=str), flush=True)


if __name__ == "__main__":
    main()
