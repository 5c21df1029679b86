"""Where a run's spans nest, read back from a real Arize Phoenix (the ``phoenix`` fixture):
under the user's own span and DBOS workflow, under DBOS's workflow and step spans when
DBOS's tracing is on, and under the call that started a companion or a sub-agent, even
when the sub-agent's run is recovered on another worker after a SIGKILL, or parks for
approval (its wait and its continuation)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Any

import httpx

from helix_dbos.client import admin
from helix_dbos.observability import session_span_context
from helix_dbos.store.migrations import migrate
from obs_kit import (
    HERE,
    crash_and_replace,
    free_port,
    run_completed,
    server,
    slow_called,
    span_tree,
    spans_when,
    stop_all,
    until,
    worker,
)

HELIX_SPANS = ("invoke_agent ", "agent_step ", "execute_tool ", "chat ", "helix.")


def _helix(span: dict[str, Any]) -> bool:
    return span["name"].startswith(HELIX_SPANS)


def _ancestors(by_id: dict[str, dict[str, Any]], span: dict[str, Any]) -> list[str]:
    names = []
    while (span := by_id.get(span["parent_id"] or "")) is not None:
        names.append(span["name"])
    return names


def test_runs_nest_under_the_callers_span_and_dbos_spans(make_database: Any, phoenix: str) -> None:
    url = make_database()
    migrate(url)
    env = {"HELIX_OBS_OTLP": f"{phoenix}/v1/traces", "HELIX_OBS_DBOS_TRACING": "1"}
    work = worker(url, env=env)
    try:
        caller = subprocess.run(
            [sys.executable, "obs_caller.py"], cwd=HERE, capture_output=True, text=True, timeout=180,
            env={**os.environ, **env, "HELIX_OBS_URL": url, "HELIX_OBS_SESSION": "nest"},
        )
    finally:
        stop_all(work)
    assert caller.returncode == 0, caller.stderr[-3000:]
    trace_id = caller.stdout.split("trace ")[-1].strip()

    def runs_in(spans: list[dict[str, Any]]) -> int:  # two runs, the sub-agent call and its run
        return sum(s["name"] in ("invoke_agent obs-assistant", "invoke_agent obs-researcher") for s in spans)

    spans = spans_when(phoenix, trace_id, lambda spans: runs_in(spans) >= 4, "the runs in Phoenix")
    by_id, children = span_tree(spans)
    [request] = [s for s in spans if s["name"] == "user-request"]
    runs = [s for s in spans if s["name"] == "invoke_agent obs-assistant" and "helix.run" in s["attributes"]]
    by_session = {s["attributes"]["helix.session_id"]: s for s in runs}
    assert set(by_session) == {"nest-1", "nest-2"}

    # started from plain code inside the user's span, run by a worker: right under that span
    # (DBOS's span of the queued workflow is a root of its own trace: linked, not a parent)
    delegated = by_session["nest-1"]
    assert delegated["parent_id"] == request["context"]["span_id"]
    assert delegated["attributes"]["helix.session.trace_id"] == format(session_span_context("nest-1").trace_id, "032x")

    # started from the user's own DBOS workflow: under its span, inside the user's span
    assert {"user_flow", "user-request"} <= set(_ancestors(by_id, by_session["nest-2"]))

    # the sub-agent's run, under DBOS's span of its workflow, under the call that started it
    [call] = [s for s in spans if s["name"] == "invoke_agent obs-researcher" and "gen_ai.tool.call.id" in s["attributes"]]
    [dbos_child] = children(call)
    assert not _helix(dbos_child)
    [child_run] = children(dbos_child, "invoke_agent obs-researcher")
    assert child_run["attributes"]["helix.parent_session_id"] == "nest-1"

    # each model call made, inside DBOS's span of its step, inside helix's agent step
    models = [s for s in spans if s["name"] == "chat mock"]
    assert len(models) == 4  # nest-1: 2 steps and the sub-agent's 1; nest-2: 1
    for model in models:
        dbos_step = by_id[model["parent_id"]]
        assert not _helix(dbos_step) and by_id[dbos_step["parent_id"]]["name"].startswith("agent_step ")


def test_companions_and_sub_agents_recovered_or_waiting_stay_under_their_calls(make_database: Any, phoenix: str) -> None:
    url = make_database()
    migrate(url)
    env = {"HELIX_OBS_OTLP": f"{phoenix}/v1/traces", "HELIX_OBS_SLOW_SECONDS": "30"}
    port = free_port()
    first = worker(url, env=env)
    serve = server(url, port, env={**env, "HELIX_OBS_SLOW_SECONDS": "0.2"})  # it may be the one that adopts
    second = None
    session = "kin"

    def start(word: str) -> None:
        response = httpx.post(f"http://127.0.0.1:{port}/start", json={"agent": "obs-lead", "input": word,
                                                                      "session_id": session}, timeout=30)
        assert response.status_code == 202, response.text

    try:
        start("spawn")
        until(lambda: run_completed(url, session, 1), "the companion's run", timeout=90)
        start("dig")
        until(lambda: slow_called(url, session), "the sub-agent to call the slow tool", timeout=90)
        time.sleep(1)
        second = crash_and_replace(first, url, env)  # while the sub-agent's slow tool runs
        until(lambda: run_completed(url, session, 2), "the recovered runs to complete", timeout=120)
        start("ask")
        [call] = until(lambda: admin.list_pending(url, session), "the sub-agent's approval request")
        admin.approve(url, session, call.tool_call_id)
        until(lambda: run_completed(url, session, 3), "the sub-agent's continuation", timeout=90)
    finally:
        stop_all(serve, first, second)

    trace_id = format(session_span_context(session).trace_id, "032x")

    def ready(spans: list[dict[str, Any]]) -> bool:
        recovered = any(s["name"] == "invoke_agent obs-digger" and s["attributes"].get("helix.recovered") for s in spans)
        return recovered and sum(s["attributes"].get("helix.continued") is True for s in spans) == 1

    spans = spans_when(phoenix, trace_id, ready, "the recovered sub-agent in Phoenix")
    by_id, children = span_tree(spans)
    lead_runs = {s["attributes"]["helix.run"]: s for s in spans if s["name"] == "invoke_agent obs-lead"}

    # the companion's run nests under the spawnAgent call of run 1's first step
    [spawn] = [s for s in spans if s["name"] == "execute_tool companion__spawnAgent"]
    assert by_id[spawn["parent_id"]]["parent_id"] == lead_runs[1]["context"]["span_id"]
    [companion_run] = children(spawn, "invoke_agent obs-researcher")
    assert companion_run["attributes"]["helix.parent_session_id"] == session

    # run 2: the lead's run recovered on the second worker; its sub-agent call (one span,
    # the same id in both executions) holds the sub-agent's recovered run
    assert lead_runs[2]["attributes"]["helix.recovered"] is True
    [call] = [s for s in spans if s["name"] == "invoke_agent obs-digger" and "gen_ai.tool.call.id" in s["attributes"]]
    step = by_id[call["parent_id"]]
    assert step["name"] == "agent_step 3" and step["parent_id"] == lead_runs[2]["context"]["span_id"]
    [digger_run] = children(call, "invoke_agent obs-digger")
    assert digger_run["attributes"]["helix.recovered"] is True
    # the lead's model call made by the killed worker hangs under the recovered step
    assert len(children(step, "chat mock")) == 1
    # the sub-agent's step 1: the model call the killed worker made, and the slow tool run
    # once more after the recovery (one span: the killed call never ended)
    [slow] = [s for s in spans if s["name"] == "execute_tool slow"]
    digger_step = by_id[slow["parent_id"]]
    assert digger_step["name"] == "agent_step 1" and digger_step["parent_id"] == digger_run["context"]["span_id"]
    [killed_model_call] = children(digger_step, "chat mock")
    assert killed_model_call["start_time"] < digger_run["start_time"]

    # run 3: the sub-agent parks for approval; its wait and its continuation, under the call
    [ask] = [s for s in spans if s["name"] == "invoke_agent obs-clerk" and "gen_ai.tool.call.id" in s["attributes"]]
    [wait] = [s for s in spans if s["name"] == "helix.wait"]
    assert wait["parent_id"] == ask["context"]["span_id"]
    clerk_runs = children(ask, "invoke_agent obs-clerk")
    assert sorted(s["attributes"]["helix.continued"] for s in clerk_runs) == [False, True]
