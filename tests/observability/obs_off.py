"""A program that configures no observability (``python obs_off.py URL``): the
OpenTelemetry API as installed, with no ``TracerProvider`` and no ``MeterProvider``, and
no Prometheus reporting. It runs one session of two turns (two parallel tool calls, then
text) with the scripted model in its own process, and prints as JSON what helix did
with observability while the run went on, counted by a profile hook on every thread
(Python's ``sys.setprofile``; nothing is replaced):

- ``start_span``: spans asked of any OpenTelemetry tracer;
- ``attach``: contexts made current (one is the run's parent, which its children see);
- ``observe`` / ``add``: helix's histograms and counters recording;
- ``step_off``: whether helix's step point takes its off path once the executor is built;
- ``provider``: the tracer provider's class, and whether a span of it records;
- ``step_count``: Prometheus's count of helix's step histogram (None: never recorded).
"""

from __future__ import annotations

import json
import sys
import threading
from collections import Counter
from typing import Any

from dbos import DBOS
from opentelemetry import context as otel_context
from opentelemetry import trace
from pydantic import BaseModel

from helix_dbos import DBOSAgentExecutor, MockLLMAdapter, dbos_config, define_agent, define_tool
from helix_dbos.observability import metrics, points
from helix_dbos.observability.switch import OFF
from helix_dbos.types import TextStepResult, ToolCallsStepResult

URL = sys.argv[1]
AGENT = "quiet-assistant"
COUNTED = {
    trace.ProxyTracer.start_span.__code__: "start_span",
    trace.NoOpTracer.start_span.__code__: "start_span",
    otel_context.attach.__code__: "attach",
    metrics._Histogram.observe.__code__: "observe",
    metrics._Counter.add.__code__: "add",
}
counts: Counter[str] = Counter()


def count(frame: Any, event: str, arg: Any) -> None:
    if event == "call" and frame.f_code in COUNTED:
        counts[COUNTED[frame.f_code]] += 1


class Query(BaseModel):
    q: str


def lookup(args: Query, ctx: object) -> dict[str, str]:
    return {"found": args.q}


def respond(messages: list[Any], tools: list[Any]) -> Any:
    turn = sum(m.role == "assistant" for m in messages)
    if turn < 2:
        return ToolCallsStepResult(tool_calls=[
            {"id": f"a{turn}", "name": "lookup", "arguments": {"q": "a"}},
            {"id": f"b{turn}", "name": "lookup", "arguments": {"q": "b"}},
        ])
    return TextStepResult(content="done", should_stop=True, stop_reason="end_turn")


agent = define_agent(name=AGENT, system_prompt="Help.", tools=[
    define_tool(name="lookup", description="Look up.", input_schema=Query, execute=lookup),
])
DBOS(config=dbos_config(URL, name="helix-obs-off", notification_listener_polling_interval_sec=0.01))
executor = DBOSAgentExecutor(llm=MockLLMAdapter(respond), database_url=URL)
executor.register(agent)
step_off = points.step(AGENT, 1) is OFF
threading.setprofile(count)
sys.setprofile(count)
DBOS.launch()
result = executor.execute(AGENT, "go", session_id="quiet-1").result(timeout=60)
sys.setprofile(None)
threading.setprofile(None)  # type: ignore[arg-type]
provider = trace.get_tracer_provider()
prometheus = __import__("prometheus_client").REGISTRY
print(json.dumps({
    "status": result.status,
    "steps": result.step_count,
    "step_off": step_off,
    "provider": type(provider).__name__,
    "recording": trace.get_tracer("helix_dbos").start_span("probe").is_recording(),
    "step_count": prometheus.get_sample_value("helix_step_duration_seconds_count", {"agent": AGENT}),
    **{name: counts[name] for name in ("start_span", "attach", "observe", "add")},
}), flush=True)
DBOS.destroy()
