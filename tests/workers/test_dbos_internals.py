"""What helix needs of DBOS that DBOS has no public API for (``helix_dbos._client.dbos_internals``),
checked against the installed DBOS in real processes. A DBOS upgrade that changes any of
these fails here, by name, instead of stranding runs in production."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

PROBE = Path(__file__).with_name("internals_probe.py")


def facts(lines: list[str]) -> dict:
    found: dict = {}
    for line in lines:
        if line.startswith("{"):
            found.update(json.loads(line))
    return found


def run_probe(url: str, *args: str) -> dict:
    done = subprocess.run([sys.executable, str(PROBE), url, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return facts(done.stdout.splitlines())


@pytest.fixture
def url(make_database: Callable[[], str]) -> str:
    return make_database()


def test_configuration_launch_and_queues_are_read_from_dbos(url: str):
    found = run_probe(url, "claiming")
    assert found["configured"] and found["name"] == "helix-probe"
    assert (found["launched_before"], found["launched"]) == (False, True)
    assert found["conductor"] is False
    assert found["queues"] == ["probe-queue"]


def test_stop_claiming_stops_dequeuing_and_destroy_is_seen(url: str):
    found = run_probe(url, "claiming")
    assert found["before"] == "ran"
    assert found["after_stop"] == "ENQUEUED", "a queue thread still dequeued after stop_claiming"
    assert (found["destroyed_before"], found["destroyed_after"], found["configured_after"]) == (False, True, True)


def test_recover_executors_hands_another_executor_s_workflow_back(url: str):
    first = subprocess.Popen([sys.executable, str(PROBE), url, "start"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        lines: list[str] = []
        deadline = time.monotonic() + 60
        while "started" not in facts(lines):
            assert time.monotonic() < deadline and first.poll() is None, first.stderr.read() if first.stderr else ""
            lines.append(first.stdout.readline())
        workflow_id = facts(lines)["started"]
    finally:
        first.kill()
        first.wait()
    found = run_probe(url, "recover", "probe-first")
    assert found["recovered"] == [workflow_id]
    assert found["result"] == "probe-first:hello", "the first step's checkpoint was not kept"
    assert run_probe(url, "recover", "probe-first")["recovered"] == [], "a second recovery re-enqueued it again"
