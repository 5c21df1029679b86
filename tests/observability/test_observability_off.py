"""With no observability configured (the OpenTelemetry API's defaults, no Prometheus
reporting), running an agent costs nothing in helix's observation points: no span is
asked of a tracer, no metric is recorded, and each step, model call, tool call and
commit takes the points' off path. The program runs in a process of its own
(``obs_off.py``), so nothing another test configured in this process counts."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from helix_dbos._store.migrations import migrate
from obs_kit import HERE


def test_a_run_with_observability_off_makes_no_spans_and_records_no_metrics(make_database: Any) -> None:
    url = make_database()
    migrate(url)
    done = subprocess.run([sys.executable, str(HERE / "obs_off.py"), url], cwd=HERE, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])

    assert seen["status"] == "completed" and seen["steps"] == 3, seen
    assert seen["provider"] == "ProxyTracerProvider" and seen["recording"] is False, seen  # the API's no-op
    assert seen["step_off"] is True, seen
    assert seen["start_span"] == 0, seen
    assert seen["observe"] == 0 and seen["add"] == 0, seen
    assert seen["step_count"] is None, seen  # Prometheus's registry never saw a step
    assert seen["attach"] == 1, seen  # the run's parent context, once per run (not per step)
