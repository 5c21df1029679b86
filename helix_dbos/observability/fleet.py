"""Gauges of the fleet, computed from the database when they are read: runs running and
waiting for people, pending calls and the age of the oldest, queued and running
workflows per queue, worker leases by status and the runs adoptions handed back.

They describe the whole deployment, not the process that reports them, so every process
with the database's URL reports the same figures; scrape one of them (or several, and
aggregate with ``max``). ``helix-dbos serve`` and ``helix-dbos worker --metrics-port``
register them; an app of its own calls :func:`register_fleet_metrics`::

    register_fleet_metrics(database_url)           # Prometheus's default registry
    register_fleet_metrics(database_url, otel=True)  # and OpenTelemetry observable gauges

Each read is one short read-only transaction on a connection of its own, at most once a
second however many gauges and scrapers ask (:data:`FRESH_SECONDS`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

import psycopg

from helix_dbos._database import libpq_url
from helix_dbos._store.fleet import Fleet, read_fleet
from helix_dbos.observability.switch import report_to_prometheus

FRESH_SECONDS = 1.0
"""Figures read less than this long ago are served again rather than read anew."""

LEASE_STATUSES = ("live", "draining", "dead", "released", "adopted")
RUN_STATUSES = ("active", "awaiting_approval", "awaiting_client_tool")
QUEUE_STATUSES = ("ENQUEUED", "PENDING")
MEMORY_STATUSES = ("pending", "complete", "failed", "text_only")


class FleetReader:
    """Reads :class:`Fleet` figures from the database, at most once per :data:`FRESH_SECONDS`.

    An agent or queue once seen keeps its series, at 0 when nothing is in progress, so a
    series does not vanish (and an alert or a graph does not lose it) when its runs end."""

    def __init__(self, database_url: str) -> None:
        self.url = libpq_url(database_url)
        self._lock = threading.Lock()
        self._read_at = 0.0
        self._fleet = Fleet()
        self._agents: set[str] = set()
        self._queues: set[str] = set()

    def read(self) -> Fleet:
        with self._lock:
            if time.monotonic() - self._read_at >= FRESH_SECONDS:
                with psycopg.connect(self.url, connect_timeout=5) as conn:
                    fleet = read_fleet(conn)
                self._agents.update(agent for agent, _ in fleet.runs)
                self._queues.update(queue for queue, _ in fleet.queues)
                self._fleet = Fleet(
                    runs={(a, s): fleet.runs.get((a, s), 0) for a in self._agents for s in RUN_STATUSES},
                    pending=fleet.pending,
                    queues={(q, s): fleet.queues.get((q, s), 0) for q in self._queues for s in QUEUE_STATUSES},
                    leases=fleet.leases,
                    adopted_runs=fleet.adopted_runs,
                    memories={status: fleet.memories.get(status, 0) for status in MEMORY_STATUSES},
                )
                self._read_at = time.monotonic()
            return self._fleet


def samples(fleet: Fleet) -> Iterator[tuple[str, str, dict[str, str], float]]:
    """Every gauge sample of ``fleet``: (name, help, labels, value). Pending-call kinds and
    lease statuses with nothing in them are reported as 0, so an alert on them sees a series."""
    for (agent, status), count in sorted(fleet.runs.items()):
        yield ("helix_runs_in_progress", "Runs in progress: active (running or due to be recovered) or waiting"
               " for a person (awaiting_approval, awaiting_client_tool).", {"agent": agent, "status": status}, count)
    for kind in ("approval", "client"):
        count, age = fleet.pending.get(kind, (0, 0.0))
        yield "helix_pending_calls", "Calls waiting for an answer from a person or a client.", {"kind": kind}, count
        yield ("helix_pending_call_oldest_age_seconds", "How long the oldest call waiting for an answer has waited.",
               {"kind": kind}, age)
    for (queue, status), count in sorted(fleet.queues.items()):
        yield ("helix_queue_workflows", "Workflows of a queue: ENQUEUED (waiting for a worker) or PENDING (taken).",
               {"queue": queue, "status": status}, count)
    for status in LEASE_STATUSES:
        yield "helix_workers", "Worker leases by status.", {"status": status}, fleet.leases.get(status, 0)
    yield ("helix_worker_adopted_runs", "Runs handed back to their queues by the adoptions of leases on record.",
           {}, fleet.adopted_runs)
    for status, count in fleet.memories.items():
        yield ("helix_memories", "Agent memories by the state of their embedding in the active space"
               " (text_only: no active embedding space).", {"status": status}, count)


class FleetCollector:
    """A ``prometheus_client`` collector of the fleet's gauges."""

    def __init__(self, reader: FleetReader) -> None:
        self.reader = reader

    def collect(self) -> Iterable[Any]:
        from prometheus_client.core import GaugeMetricFamily

        families: dict[str, GaugeMetricFamily] = {}
        for name, doc, labels, value in samples(self.reader.read()):
            family = families.get(name)
            if family is None:
                family = families[name] = GaugeMetricFamily(name, doc, labels=list(labels))
            family.add_metric(list(labels.values()), value)
        return list(families.values())

    def describe(self) -> Iterable[Any]:
        return []  # not read at registration: the database may not be up yet


OTEL_GAUGES = {
    "helix_runs_in_progress": ("helix.runs.in_progress", "{run}"),
    "helix_pending_calls": ("helix.pending_calls", "{call}"),
    "helix_pending_call_oldest_age_seconds": ("helix.pending_call.oldest_age", "s"),
    "helix_queue_workflows": ("helix.queue.workflows", "{workflow}"),
    "helix_workers": ("helix.workers", "{worker}"),
    "helix_worker_adopted_runs": ("helix.worker.adopted_runs", "{run}"),
}
"""Each gauge's OpenTelemetry name and unit: OpenTelemetry's Prometheus translation gives
back the Prometheus name (``helix.pending_call.oldest_age`` in ``s`` is scraped as
``helix_pending_call_oldest_age_seconds``)."""

_readers: dict[str, FleetReader] = {}
_reported: set[tuple[str, str]] = set()


def register_fleet_metrics(database_url: str, *, prometheus: bool = True, otel: bool = False) -> FleetReader:
    """Report the fleet's gauges of ``database_url``: through Prometheus's default registry,
    and with ``otel`` as OpenTelemetry observable gauges of the meter ``helix_dbos``
    (read through whatever ``MeterProvider`` the app installs, before or after this call).
    Each system reports a URL once: registering it again for the same system does nothing
    more, so ``helix-dbos serve`` and the app may both call this.

    With ``prometheus``, this process's own work (runs, steps, model and tool calls) is
    counted in that registry from now on too (:mod:`~helix_dbos.observability.metrics`).

    Args:
        database_url: The database whose fleet to report.
        prometheus: Report through Prometheus's default registry (needs
            ``prometheus-client``).
        otel: Report as OpenTelemetry observable gauges.

    Returns:
        The reader of the figures, shared by both.
    """
    reader = _readers.setdefault(database_url, FleetReader(database_url))
    if prometheus:
        report_to_prometheus()
    if prometheus and (database_url, "prometheus") not in _reported:
        from prometheus_client import REGISTRY

        REGISTRY.register(FleetCollector(reader))
        _reported.add((database_url, "prometheus"))
    if otel and (database_url, "otel") not in _reported:
        _observe_with_otel(reader)
        _reported.add((database_url, "otel"))
    return reader


def _observe_with_otel(reader: FleetReader) -> None:
    from opentelemetry import metrics
    from opentelemetry.metrics import CallbackOptions, Observation

    meter = metrics.get_meter("helix_dbos")
    docs = {name: doc for name, doc, _, _ in samples(Fleet(runs={("", ""): 0}, queues={("", ""): 0}))}

    def callback_for(wanted: str) -> Any:
        def observe(options: CallbackOptions) -> Iterable[Observation]:
            return [Observation(value, labels) for name, _, labels, value in samples(reader.read()) if name == wanted]

        return observe

    for name, (otel_name, unit) in OTEL_GAUGES.items():
        meter.create_observable_gauge(otel_name, callbacks=[callback_for(name)], unit=unit, description=docs[name])
