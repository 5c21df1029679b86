"""A real Prometheus (Debian's ``prometheus``) scrapes ``/metrics`` of a ``helix-dbos
worker`` and of a ``helix-dbos serve``; the figures are read back with PromQL through
Prometheus's HTTP API.

The server takes the runs over HTTP and queues them; the worker runs them: a text run,
a parallel tool step, a sub-agent, and a run that waits for approval. The worker reports
the work it did (runs, steps, model and tool latency, tokens); both report the fleet's
gauges read from the database (runs waiting for people, the pending call, live leases).
Another test reads a failed run, an aborted one, a running one, the queues' depth and the
leases of a worker SIGKILLed (adopted, with its run) and of one draining.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from helix_dbos import RunEnqueuer
from helix_dbos import admin
from helix_dbos._store.migrations import migrate
from obs_kit import free_port, run_completed, server, slow_called, stop_all, until, worker
from serving import start_run, wait_until_served

SCRAPE_CONFIG = """
global:
  scrape_interval: 500ms
  scrape_timeout: 400ms
scrape_configs:
  - job_name: helix-worker
    static_configs: [{{targets: ["127.0.0.1:{worker}"]}}]
  - job_name: helix-serve
    static_configs: [{{targets: ["127.0.0.1:{serve}"]}}]
"""


@pytest.fixture
def prometheus(tmp_path: Path) -> Any:
    """Start Prometheus on a config the test writes; yields (config path, API base URL, reload)."""
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail("Debian's prometheus is not installed: apt-get install prometheus (scripts/test.sh does, as root)")
    ports = {"worker": free_port(), "serve": free_port()}
    config = tmp_path / "prometheus.yml"
    config.write_text(SCRAPE_CONFIG.format(**ports))
    port = free_port()
    proc = subprocess.Popen(
        [binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        text=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    wait_until_served(f"{base}/-/ready", proc, timeout=60)
    try:
        yield ports, base
    finally:
        proc.terminate()
        proc.wait(30)


def promql(base: str, query: str) -> dict[str, float]:
    """The instant vector of ``query``: each series' value by its ``job`` (or its labels)."""
    body = httpx.get(f"{base}/api/v1/query", params={"query": query}, timeout=10).json()
    assert body["status"] == "success", body
    return {
        result["metric"].get("job", str(sorted(result["metric"].items()))): float(result["value"][1])
        for result in body["data"]["result"]
    }


ENDED = 'sum by (job) (helix_runs_ended_total{agent="obs-assistant",status="completed"})'


def start_runs(port: int, prefix: str, *words: str) -> None:
    """``POST /start`` on the server: one run of ``obs-assistant`` per word, session ``<prefix>-<word>``."""
    for word in words:
        start_run(f"http://127.0.0.1:{port}", "obs-assistant", word, f"{prefix}-{word}")


def _is(seen: dict[str, float], wanted: dict[str, float]) -> tuple[bool, dict[str, float]]:
    return seen == wanted, seen


def test_prometheus_reads_the_work_of_a_worker_and_the_fleet_from_both(make_database: Any, prometheus: Any) -> None:
    ports, prom = prometheus
    url = make_database()
    migrate(url)
    work = worker(url, "--metrics-port", str(ports["worker"]))
    serve = server(url, ports["serve"])
    try:
        api = f"http://127.0.0.1:{ports['serve']}"
        start_runs(ports["serve"], "prom", "hello", "tools", "delegate", "approve")
        until(lambda: promql(prom, ENDED).get("helix-worker") == 3, "three completed runs", timeout=90)
        waiting = 'helix_runs_in_progress{agent="obs-assistant",status="awaiting_approval"}'
        until(lambda: _is(promql(prom, waiting), {"helix-worker": 1, "helix-serve": 1}), "the waiting run, from both")

        assert promql(prom, 'helix_pending_calls{kind="approval"}') == {"helix-worker": 1, "helix-serve": 1}
        age = promql(prom, 'helix_pending_call_oldest_age_seconds{kind="approval"}')
        assert set(age) == {"helix-worker", "helix-serve"} and all(0 < v < 120 for v in age.values())
        assert promql(prom, 'helix_workers{status="live"}') == {"helix-worker": 2, "helix-serve": 2}
        assert promql(prom, 'sum by (job) (helix_runs_started_total)') == {"helix-worker": 5}  # 4 + the sub-agent's
        tool_calls = promql(prom, 'sum by (job) (helix_tool_call_duration_seconds_count{tool="lookup",outcome="ok"})')
        assert tool_calls == {"helix-worker": 2}
        steps = promql(prom, 'sum by (job) (helix_step_duration_seconds_count{agent="obs-assistant"})')
        assert steps == {"helix-worker": 5}  # hello 1, tools 2, delegate 2; approve: parked, not committed yet
        models = promql(prom, 'sum by (job) (helix_model_call_duration_seconds_count{model="mock",outcome="ok"})')
        assert models == {"helix-worker": 7}  # the 5 steps, the parked step's and the sub-agent's
        tokens = promql(prom, 'sum by (job) (helix_tokens_total{model="mock"})')
        assert tokens["helix-worker"] > 0
        cost = promql(prom, 'sum by (job) (helix_cost_usd_total{model="mock"})')
        assert cost["helix-worker"] == pytest.approx(tokens["helix-worker"] / 1e6)  # obs_app's price
        p99 = promql(prom, "histogram_quantile(0.99, sum by (le, job) (helix_tool_call_duration_seconds_bucket))")
        assert 0.05 <= p99["helix-worker"] <= 0.25

        [call] = admin.list_pending(url, "prom-approve")
        approve = httpx.post(f"{api}/submit-tool-result", json={
            "session_id": "prom-approve", "tool_call_id": call.tool_call_id, "approved": True,
        }, timeout=30)
        assert approve.status_code < 300, approve.text
        until(lambda: promql(prom, ENDED).get("helix-worker") == 4, "the approved run to complete", timeout=90)
        until(lambda: _is(promql(prom, waiting), {"helix-worker": 0, "helix-serve": 0}), "no run waiting")
        assert promql(prom, 'helix_pending_calls{kind="approval"}') == {"helix-worker": 0, "helix-serve": 0}
    finally:
        serve.stop()
        work.stop()


def test_the_same_figures_through_opentelemetry_metrics(make_database: Any, prometheus: Any) -> None:
    """A worker whose app reports through OpenTelemetry only (a ``MeterProvider`` with
    OpenTelemetry's Prometheus reader, and ``register_fleet_metrics(url, otel=True)``):
    Prometheus reads its figures under the names and labels of the Prometheus path."""
    ports, prom = prometheus
    url = make_database()
    migrate(url)
    work = worker(url, env={"HELIX_OBS_OTEL_METRICS_PORT": str(ports["worker"])})
    serve = server(url, ports["serve"])
    try:
        start_runs(ports["serve"], "otel", "hello", "tools", "approve")
        until(lambda: promql(prom, ENDED).get("helix-worker") == 2, "two completed runs", timeout=90)
        waiting = 'sum by (job) (helix_runs_in_progress{agent="obs-assistant",status="awaiting_approval"})'
        until(lambda: _is(promql(prom, waiting), {"helix-worker": 1, "helix-serve": 1}), "the waiting run, from both")

        through_otel = 'count by (job) (helix_runs_started_total{otel_scope_name="helix_dbos"})'
        assert set(promql(prom, through_otel)) == {"helix-worker"}  # the server's come from prometheus_client
        assert promql(prom, 'sum by (job) (helix_runs_started_total)') == {"helix-worker": 3}
        tool_calls = promql(prom, 'sum by (job) (helix_tool_call_duration_seconds_count{tool="lookup",outcome="ok"})')
        assert tool_calls == {"helix-worker": 2}
        steps = promql(prom, 'sum by (job) (helix_step_duration_seconds_count{agent="obs-assistant"})')
        assert steps == {"helix-worker": 3}  # hello 1, tools 2; approve: parked, not committed yet
        assert promql(prom, 'sum by (job) (helix_tokens_total{model="mock",type="input"})')["helix-worker"] > 0
        assert promql(prom, 'sum by (job) (helix_cost_usd_total{model="mock"})')["helix-worker"] > 0
        p99 = promql(prom, "histogram_quantile(0.99, sum by (le, job) (helix_tool_call_duration_seconds_bucket))")
        assert 0.05 <= p99["helix-worker"] <= 0.25
        pending = promql(prom, 'sum by (job) (helix_pending_calls{kind="approval"})')
        assert pending == {"helix-worker": 1, "helix-serve": 1}
        age = promql(prom, 'max by (job) (helix_pending_call_oldest_age_seconds{kind="approval"})')
        assert 0 < age["helix-worker"] < 120
        live = 'sum by (job) (helix_workers{status="live"})'  # a loaded machine can be late to renew a lease
        until(lambda: _is(promql(prom, live), {"helix-worker": 2, "helix-serve": 2}), "both processes live, from both")
    finally:
        serve.stop()
        work.stop()


def test_prometheus_reads_failed_aborted_and_running_runs_the_queues_and_the_leases(
    make_database: Any, prometheus: Any
) -> None:
    """A run that fails, a running one aborted through the server, a run queued where no
    worker listens (queued, not yet running), and the worker SIGKILLed in a run's tool: the server adopts its lease
    and hands the run back to the queue, a new worker takes it and is drained (SIGTERM)
    while the run's tool runs. Each state read back through Prometheus."""
    ports, prom = prometheus
    url = make_database()
    migrate(url)
    slow = {"HELIX_OBS_SLOW_SECONDS": "15"}
    first = worker(url, "--metrics-port", str(ports["worker"]), env=slow)
    serve = server(url, ports["serve"])
    second = None
    api = f"http://127.0.0.1:{ports['serve']}"
    both = ("helix-worker", "helix-serve")

    def fleet(query: str, wanted: dict[str, float], what: str) -> None:
        until(lambda: _is(promql(prom, query), wanted), what, timeout=90)

    try:
        start_runs(ports["serve"], "fleet", "fail")
        fleet('sum by (job) (helix_runs_ended_total{agent="obs-assistant",status="failed"})', {"helix-worker": 1},
              "the failed run")
        errors = promql(prom, 'sum by (job) (helix_model_call_duration_seconds_count{outcome="error"})')
        assert errors == {"helix-worker": 1}

        start_runs(ports["serve"], "fleet", "slow")
        until(lambda: slow_called(url, "fleet-slow"), "the run to call the slow tool")
        enqueuer = RunEnqueuer(url, queue="idle")  # no worker listens to it
        enqueuer.enqueue("obs-assistant", "hello", session_id="fleet-idle")
        enqueuer.close()
        # a queued run's session is active from its start: the running run and the queued one
        fleet('helix_runs_in_progress{agent="obs-assistant",status="active"}', dict.fromkeys(both, 2),
              "the running and the queued run, from both")
        fleet('helix_queue_workflows{queue="agents",status="PENDING"}', dict.fromkeys(both, 1), "the running run")
        fleet('helix_queue_workflows{queue="idle",status="ENQUEUED"}', dict.fromkeys(both, 1), "the queued run")

        response = httpx.post(f"{api}/abort", json={"session_id": "fleet-slow", "reason": "test"}, timeout=30)
        assert response.status_code == 200, response.text
        fleet('sum by (job) (helix_runs_ended_total{agent="obs-assistant",status="aborted"})', {"helix-serve": 1},
              "the run aborted by the server")
        fleet('helix_runs_in_progress{agent="obs-assistant",status="active"}', dict.fromkeys(both, 1),
              "the queued run only")

        start_runs(ports["serve"], "again", "slow")
        until(lambda: slow_called(url, "again-slow"), "the next run to call the slow tool")
        first.kill()  # in the slow tool
        fleet('helix_workers{job="helix-serve",status="adopted"}', {"helix-serve": 1}, "the server to adopt the lease")
        assert promql(prom, 'helix_worker_adopted_runs{job="helix-serve"}') == {"helix-serve": 1}
        fleet('helix_queue_workflows{job="helix-serve",queue="agents",status="ENQUEUED"}', {"helix-serve": 1},
              "the run handed back to its queue")

        second = worker(url, "--metrics-port", str(ports["worker"]), env=slow)
        fleet('helix_queue_workflows{job="helix-serve",queue="agents",status="PENDING"}', {"helix-serve": 1},
              "the second worker to take the run")
        second.popen.send_signal(signal.SIGTERM)  # it drains: the run's tool runs on (15 s)
        fleet('helix_workers{job="helix-serve",status="draining"}', {"helix-serve": 1}, "the draining worker")
        until(lambda: run_completed(url, "again-slow", 1), "the drained worker to finish the run", timeout=90)
    finally:
        stop_all(serve, first, second)
