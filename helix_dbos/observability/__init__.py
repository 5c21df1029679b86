"""Observability: OpenTelemetry traces of sessions and metrics of the work and the fleet.

- :mod:`~helix_dbos.observability.tracing`: one trace per session (the API only; the SDK
  and exporter are the app's).
- :mod:`~helix_dbos.observability.points`: the spans and metrics of a run, a step, a
  model call, a tool call, a sub-agent call, a wait and a commit.
- :mod:`~helix_dbos.observability.metrics`: what this process did (Prometheus and
  OpenTelemetry instruments).
- :mod:`~helix_dbos.observability.fleet`: gauges of the whole deployment, read from the
  database at scrape time.
- :mod:`~helix_dbos.observability.exposition`: ``/metrics``.
- :mod:`~helix_dbos.observability.switch`: whether this process observes at all (off:
  the points make no span and record nothing).

See docs/observability.md.
"""

from helix_dbos.observability.fleet import register_fleet_metrics
from helix_dbos.observability.tracing import session_span_context

__all__ = ["register_fleet_metrics", "session_span_context"]
