"""The work a process did, as metrics: runs started and ended, step, model-call and tool
latency, tokens and cost.

Each figure is recorded twice, through the same call: into a ``prometheus_client``
instrument of the default registry (when ``prometheus-client`` is installed: the
``metrics`` and ``server`` extras), which ``/metrics`` of ``helix-dbos serve`` and
``helix-dbos worker`` exposes, and into an OpenTelemetry instrument of the meter
``helix_dbos``. Each system records only once it is on
(:mod:`~helix_dbos.observability.switch`): ``prometheus_client`` once this process
reports there (``register_fleet_metrics``, which ``helix-dbos serve`` and ``helix-dbos
worker --metrics-port`` call), OpenTelemetry once the app installed a ``MeterProvider``.

The OpenTelemetry names and units are chosen so that OpenTelemetry's Prometheus
translation gives back the Prometheus names: ``helix.runs.started`` (unit ``{run}``) is
scraped as ``helix_runs_started_total``, ``helix.step.duration`` (unit ``s``) as
``helix_step_duration_seconds``, so the same PromQL reads either path.

A figure is recorded only where the work was done: a model call or a tool call whose
step DBOS replays from its checkpoint records nothing, a step is timed only when this
process committed it. What describes the fleet rather than this process's work (runs in
progress, pending calls, queues, worker leases) is read from the database at scrape time
(:mod:`helix_dbos.observability.fleet`).
"""

from __future__ import annotations

from typing import Any

from opentelemetry import metrics as otel_metrics

from helix_dbos.observability.switch import SWITCH, refresh

try:
    import prometheus_client as prom
except ImportError:  # the metrics extra is not installed: OpenTelemetry only
    _PROMETHEUS = False
else:
    _PROMETHEUS = True

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
"""Seconds; from a fast tool to a slow model call."""

_meter = otel_metrics.get_meter("helix_dbos")


class _Counter:
    """A counter under one name in both systems."""

    def __init__(self, name: str, doc: str, labels: tuple[str, ...], unit: str) -> None:
        self.prom = prom.Counter(name, doc, labels) if _PROMETHEUS else None
        self.otel = _meter.create_counter(name.replace("_", "."), unit=unit, description=doc)
        self.labels = labels

    def add(self, amount: float, **labels: str) -> None:
        if SWITCH.prometheus and self.prom is not None:
            self.prom.labels(**labels).inc(amount)
        if SWITCH.otel_metrics:
            self.otel.add(amount, labels)


class _Histogram:
    """A latency histogram (seconds) under one name in both systems."""

    def __init__(self, name: str, doc: str, labels: tuple[str, ...]) -> None:
        self.prom = prom.Histogram(name, doc, labels, buckets=LATENCY_BUCKETS) if _PROMETHEUS else None
        self.otel = _meter.create_histogram(
            name.replace("_", ".").removesuffix(".seconds"), unit="s", description=doc,
            explicit_bucket_boundaries_advisory=list(LATENCY_BUCKETS),
        )

    def observe(self, seconds: float, **labels: str) -> None:
        if SWITCH.prometheus and self.prom is not None:
            self.prom.labels(**labels).observe(seconds)
        if SWITCH.otel_metrics:
            self.otel.record(seconds, labels)


RUNS_STARTED = _Counter("helix_runs_started", "Runs this process began (execute or resume).", ("agent",), "{run}")
RUNS_ENDED = _Counter(
    "helix_runs_ended", "Runs that ended in this process, by how (completed, failed, interrupted, aborted).",
    ("agent", "status"), "{run}",
)
STEP_SECONDS = _Histogram("helix_step_duration_seconds", "Agent steps this process committed, start to commit.", ("agent",))
MODEL_SECONDS = _Histogram("helix_model_call_duration_seconds", "Model calls this process made.", ("model", "outcome"))
TOOL_SECONDS = _Histogram("helix_tool_call_duration_seconds", "Tool calls this process ran.", ("tool", "outcome"))
TOKENS = _Counter("helix_tokens", "Tokens of the model calls this process made.", ("model", "type"), unit="{token}")
MCP_CALLS = _Counter(
    "helix_mcp_calls", "MCP tool calls this process made, by server and outcome (ok or error).",
    ("server", "outcome"), "{call}",
)
EMBEDDING_SECONDS = _Histogram(
    "helix_embedding_duration_seconds", "Memory embeddings this process computed (agent memory).", ("model", "outcome")
)
EMBEDDING_FAILURES = _Counter(
    "helix_embedding_failures", "Memory embedding attempts that failed in this process.", ("model",), "{attempt}"
)
COST = _Counter("helix_cost_usd", "Cost in US dollars of the model calls this process made.", ("model",), unit="{USD}")


def run_started(agent: str) -> None:
    RUNS_STARTED.add(1, agent=agent)


def run_ended(agent: str, status: str) -> None:
    refresh()  # an abort is counted by the process that ordered it, which may run nothing
    RUNS_ENDED.add(1, agent=agent, status=status)


def step_committed(agent: str, seconds: float) -> None:
    STEP_SECONDS.observe(seconds, agent=agent)


def model_called(model: str, seconds: float, usage: Any | None, ok: bool) -> None:
    """A model call that ended: ``ok``, or an error (the model's answer was an error
    after its retries, or the call raised: ``usage`` None)."""
    MODEL_SECONDS.observe(seconds, model=model, outcome="ok" if ok else "error")
    if usage is None:
        return
    TOKENS.add(usage.input_tokens, model=model, type="input")
    TOKENS.add(usage.output_tokens, model=model, type="output")
    if usage.cost_usd:
        COST.add(usage.cost_usd, model=model)


def tool_called(tool: str, seconds: float, ok: bool) -> None:
    TOOL_SECONDS.observe(seconds, tool=tool, outcome="ok" if ok else "error")


def mcp_called(server: str, ok: bool) -> None:
    MCP_CALLS.add(1, server=server, outcome="ok" if ok else "error")


def embedded(model: str, seconds: float, ok: bool) -> None:
    """One embedding attempt of a memory (``helix_dbos.memory.embedding``)."""
    EMBEDDING_SECONDS.observe(seconds, model=model, outcome="ok" if ok else "error")
    if not ok:
        EMBEDDING_FAILURES.add(1, model=model)
