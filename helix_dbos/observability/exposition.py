"""``/metrics`` in Prometheus's text format: on the agent server's port
(:func:`with_metrics`, what ``helix-dbos serve`` does) or on a port of its own
(:func:`serve_metrics`, ``helix-dbos worker --metrics-port``).

Both expose Prometheus's default registry: the work this process did
(:mod:`helix_dbos.observability.metrics`), the fleet's gauges read from the database
(:mod:`helix_dbos.observability.fleet`), and whatever else the app registers there.
``/metrics`` asks for no authentication (Prometheus scrapes it); keep the port inside
your network.
"""

from __future__ import annotations

from typing import Any

from helix_dbos.errors import ConfigurationError
from helix_dbos.observability.fleet import register_fleet_metrics

METRICS_EXTRA = "prometheus-client is not installed: pip install 'helix-dbos[metrics]'"


def _prometheus() -> Any:
    try:
        import prometheus_client
    except ImportError:
        raise ConfigurationError(METRICS_EXTRA) from None
    return prometheus_client


def with_metrics(app: Any, database_url: str) -> Any:
    """``app`` (an ASGI app) with ``GET /metrics`` in front of it."""
    prometheus = _prometheus()
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Mount, Route

    register_fleet_metrics(database_url)

    def metrics(request: Request) -> Response:
        return Response(prometheus.generate_latest(prometheus.REGISTRY), media_type=prometheus.CONTENT_TYPE_LATEST)

    return Starlette(routes=[Route("/metrics", metrics), Mount("/", app=app)])


def serve_metrics(port: int, database_url: str, host: str = "0.0.0.0") -> None:
    """Serve ``/metrics`` on ``host:port`` from a daemon thread; a port that cannot be
    bound (taken, privileged) raises :class:`ConfigurationError` saying which."""
    prometheus = _prometheus()
    try:
        prometheus.start_http_server(port, addr=host)
    except OSError as exc:
        raise ConfigurationError(f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}") from None
    register_fleet_metrics(database_url)
