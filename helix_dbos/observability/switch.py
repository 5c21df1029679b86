"""Whether helix observes at all, decided where that can change rather than at every
observation point.

helix's points (:mod:`~helix_dbos.observability.points`) make spans and record metrics
only when something receives them:

- spans, once the app installed a ``TracerProvider`` (``trace.set_tracer_provider``, or
  ``OTEL_PYTHON_TRACER_PROVIDER``); with the OpenTelemetry API's default every span is a
  no-op;
- OpenTelemetry metrics, once the app installed a ``MeterProvider``;
- Prometheus metrics, once this process reports to ``prometheus_client``'s default
  registry: :func:`~helix_dbos.observability.register_fleet_metrics`, which
  ``helix-dbos serve`` and ``helix-dbos worker --metrics-port`` call.

The providers are looked at when the executor is built and when a run's workflow starts
(:func:`refresh`); OpenTelemetry lets a process install each provider once, so what is
on stays on. With none of them, every point of a step, a model call, a tool call and a
commit is one attribute read that hands back :data:`OFF`::

    if not SWITCH.observing:
        return OFF
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from opentelemetry import metrics, trace


@dataclass
class Switch:
    """What this process observes."""

    tracing: bool = False
    """A ``TracerProvider`` is installed: helix's spans are made."""
    otel_metrics: bool = False
    """A ``MeterProvider`` is installed: helix's OpenTelemetry instruments record."""
    prometheus: bool = False
    """helix's ``prometheus_client`` instruments record (``register_fleet_metrics``)."""
    observing: bool = False
    """Any of the above: the points do their work."""

    def update(self) -> None:
        self.observing = self.tracing or self.otel_metrics or self.prometheus


SWITCH = Switch()
"""This process's switch (one per process, as OpenTelemetry's providers are)."""


def tracer_provider_installed() -> bool:
    """Whether the app installed a ``TracerProvider`` (not the API's proxy or no-op)."""
    return not isinstance(trace.get_tracer_provider(), (trace.ProxyTracerProvider, trace.NoOpTracerProvider))


def meter_provider_installed() -> bool:
    """Whether the app installed a ``MeterProvider``: one from outside the API package
    (whose own providers, the default proxy and the no-op, record nothing)."""
    return not type(metrics.get_meter_provider()).__module__.startswith("opentelemetry.metrics")


def refresh() -> Switch:
    """Look again at the providers the app installed."""
    SWITCH.tracing = SWITCH.tracing or tracer_provider_installed()
    SWITCH.otel_metrics = SWITCH.otel_metrics or meter_provider_installed()
    SWITCH.update()
    return SWITCH


def report_to_prometheus() -> None:
    """From now on helix's work is counted in ``prometheus_client``'s default registry."""
    SWITCH.prometheus = True
    SWITCH.update()


class Off:
    """What an observation point gives when nothing is observed: it enters and exits,
    and takes what the code around it reports (a model's answer, a tool's outcome, a
    commit's outcome, a run's end) without doing anything."""

    def __enter__(self) -> Off:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def __call__(self, *reported: Any) -> None:
        return None

    def outcome(self, outcome: Any) -> None:
        return None

    def failed(self, exc: BaseException) -> None:
        return None

    def finish(self, result: Any) -> None:
        return None


OFF = Off()
