"""The app module of the observability tests (``helix-dbos worker`` / ``serve`` load it):
DBOS on ``$HELIX_OBS_URL``, a scripted model (priced: a millionth of a dollar a token),
and the agent ``obs-assistant`` whose first answer depends on the message it gets:

- ``tools``: two ``lookup`` calls in one step (a parallel tool step), then text;
- ``approve``: a ``transfer`` call that waits for approval, then text;
- ``delegate``: a call of the sub-agent ``obs-researcher`` (which answers at once), then text;
- ``slow``: a ``slow`` call that sleeps ``$HELIX_OBS_SLOW_SECONDS`` (a crash test kills it), then text;
- ``fail``: the model call fails for good (``PermanentLLMError``), so the run fails;
- anything else: text.

The agent ``obs-lead`` answers ``dig`` with a call of the sub-agent ``obs-digger`` (which
calls ``slow``), ``ask`` with a call of the sub-agent ``obs-clerk`` (which calls
``transfer``, waiting for approval), and ``spawn`` with a blocking companion ``obs-researcher``.

With ``$HELIX_OBS_OTLP`` set (an OTLP/HTTP traces endpoint) the process exports its spans
there, each as it ends (a killed process loses none that ended), with helix's stable span
ids (``StableSpanIds``); ``$HELIX_OBS_DBOS_TRACING`` turns DBOS's own spans on too. With
``$HELIX_OBS_EXPORT_DELAY`` (seconds) a synchronous exporter takes that long over each
run span of ``obs-assistant``, as a slow exporter would: the run's workflow returns that
much later than its last step commits.

With ``$HELIX_OBS_OTEL_METRICS_PORT`` the process reports its metrics through
OpenTelemetry only: a ``MeterProvider`` whose Prometheus reader is served on that port
(a registry of its own, so nothing of ``prometheus_client``'s default registry is mixed
in), and the fleet's gauges as OpenTelemetry observable gauges.
"""

from __future__ import annotations

import os
import time
from typing import Any

from dbos import DBOS
from pydantic import BaseModel

from helix_dbos import (
    DBOSAgentExecutor,
    MockLLMAdapter,
    create_sub_agent_tool,
    dbos_config,
    define_agent,
    define_tool,
    persistent_agent,
)
from helix_dbos.llm import PermanentLLMError
from helix_dbos.observability import register_fleet_metrics
from helix_dbos.types import (
    AssistantMessage,
    Message,
    StepResult,
    TextStepResult,
    ToolCallsStepResult,
    ToolSpec,
    Usage,
    UserMessage,
)

URL = os.environ["HELIX_OBS_URL"]


def _tracing(endpoint: str) -> None:
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from helix_dbos.observability.span_ids import StableSpanIds

    provider = TracerProvider(resource=Resource.create({"service.name": "obs-app"}), id_generator=StableSpanIds())
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    trace.set_tracer_provider(provider)


def _slow_exports(delay: float) -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

    class SlowExporter(SpanExporter):
        def export(self, spans: object) -> SpanExportResult:
            if any(span.name == "invoke_agent obs-assistant" for span in spans):  # type: ignore[attr-defined]
                time.sleep(delay)
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(SlowExporter()))
    trace.set_tracer_provider(provider)


def _otel_metrics(port: int) -> None:
    from opentelemetry import metrics
    from opentelemetry.exporter.prometheus import PrometheusMetricReader
    from opentelemetry.sdk.metrics import MeterProvider
    from prometheus_client import CollectorRegistry, start_http_server

    registry = CollectorRegistry()
    metrics.set_meter_provider(MeterProvider(metric_readers=[PrometheusMetricReader(registry=registry)]))
    register_fleet_metrics(URL, prometheus=False, otel=True)
    start_http_server(port, addr="127.0.0.1", registry=registry)


if os.environ.get("HELIX_OBS_OTEL_METRICS_PORT"):
    _otel_metrics(int(os.environ["HELIX_OBS_OTEL_METRICS_PORT"]))
if os.environ.get("HELIX_OBS_OTLP"):
    _tracing(os.environ["HELIX_OBS_OTLP"])
elif os.environ.get("HELIX_OBS_EXPORT_DELAY"):
    _slow_exports(float(os.environ["HELIX_OBS_EXPORT_DELAY"]))


class PricedMock(MockLLMAdapter):
    """The scripted model, with a cost: a millionth of a dollar per token."""

    async def generate_step(self, *args: Any, **kwargs: Any) -> tuple[StepResult, Usage]:
        result, usage = await super().generate_step(*args, **kwargs)
        return result, usage.model_copy(update={"cost_usd": usage.total_tokens / 1e6})


class Query(BaseModel):
    q: str


class Amount(BaseModel):
    amount: int


def lookup(args: Query, ctx: object) -> dict:
    time.sleep(0.05)
    return {"found": args.q}


def transfer(args: Amount, ctx: object) -> dict:
    return {"transferred": args.amount}


def slow(args: Query, ctx: object) -> dict:
    time.sleep(float(os.environ.get("HELIX_OBS_SLOW_SECONDS", "0.1")))
    return {"slept": args.q}


def respond(messages: list[Message], tools: list[ToolSpec]) -> StepResult:
    """The first answer of a run by its message; after any tool result, text."""
    last_user = max(i for i, m in enumerate(messages) if isinstance(m, UserMessage))
    if any(isinstance(m, AssistantMessage) for m in messages[last_user:]):
        return TextStepResult(content="done", should_stop=True, stop_reason="end_turn")
    word = str(messages[last_user].content)
    if word == "fail":
        raise PermanentLLMError("the model refuses")
    n = last_user
    calls = {
        "tools": [{"id": f"l1-{n}", "name": "lookup", "arguments": {"q": "a"}},
                  {"id": f"l2-{n}", "name": "lookup", "arguments": {"q": "b"}}],
        "approve": [{"id": f"t-{n}", "name": "transfer", "arguments": {"amount": 5}}],
        "delegate": [{"id": f"d-{n}", "name": "subagent__obs-researcher", "arguments": {"input": "dig"}}],
        "slow": [{"id": f"s-{n}", "name": "slow", "arguments": {"q": "z"}}],
        "dig": [{"id": f"g-{n}", "name": "subagent__obs-digger", "arguments": {"input": "slow"}}],
        "ask": [{"id": f"a-{n}", "name": "subagent__obs-clerk", "arguments": {"input": "approve"}}],
        "spawn": [{"id": f"c-{n}", "name": "companion__spawnAgent",
                   "arguments": {"agentType": "obs-researcher", "message": "hi", "name": "r1"}}],
    }.get(word)
    if calls is None or not tools:
        return TextStepResult(content=f"said {word}", should_stop=True, stop_reason="end_turn")
    return ToolCallsStepResult(tool_calls=calls)


researcher = define_agent(name="obs-researcher", system_prompt="Research.")
slow_tool = define_tool(name="slow", description="Take time.", input_schema=Query, execute=slow)
digger = define_agent(name="obs-digger", system_prompt="Dig.", tools=[slow_tool])
transfer_tool = define_tool(name="transfer", description="Pay.", input_schema=Amount, execute=transfer,
                            require_approval=True)
clerk = define_agent(name="obs-clerk", system_prompt="Pay.", tools=[transfer_tool])
assistant = define_agent(
    name="obs-assistant", system_prompt="Help.",
    tools=[
        define_tool(name="lookup", description="Look up.", input_schema=Query, execute=lookup),
        transfer_tool,
        slow_tool,
        create_sub_agent_tool(researcher),
    ],
)
lead = define_agent(
    name="obs-lead", system_prompt="Lead.", tools=[create_sub_agent_tool(digger), create_sub_agent_tool(clerk)],
    persistent_agents=[persistent_agent(researcher)],
)

DBOS(config=dbos_config(URL, name="helix-obs-app", notification_listener_polling_interval_sec=0.01,
                        enable_otlp=bool(os.environ.get("HELIX_OBS_DBOS_TRACING"))))
executor = DBOSAgentExecutor(llm=PricedMock(respond), database_url=URL, default_queue="agents")
executor.register(assistant, lead)
