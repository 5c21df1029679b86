"""Where a run's spans nest, read back from a real Arize Phoenix (the ``phoenix`` fixture):
under the user's own span and DBOS workflow, whether the run is queued for a worker or
started in the caller's process (also after another process recovers it), under DBOS's
workflow and step spans when DBOS's tracing is on, and under the call that started a companion or a sub-agent, even
when the sub-agent's run is recovered on another worker after a SIGKILL, or parks for
approval (its wait and its continuation)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Any

import pytest

from helix_dbos import admin
from helix_dbos.observability import session_span_context
from helix_dbos._store.migrations import migrate
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
from serving import start_run

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

    def runs_in(spans: list[dict[str, Any]]) -> int:  # three runs, the sub-agent call and its run
        return sum(s["name"] in ("invoke_agent obs-assistant", "invoke_agent obs-researcher") for s in spans)

    spans = spans_when(phoenix, trace_id, lambda spans: runs_in(spans) >= 5, "the runs in Phoenix")
    by_id, children = span_tree(spans)
    [request] = [s for s in spans if s["name"] == "user-request"]
    runs = [s for s in spans if s["name"] == "invoke_agent obs-assistant" and "helix.run" in s["attributes"]]
    by_session = {s["attributes"]["helix.session_id"]: s for s in runs}
    assert set(by_session) == {"nest-1", "nest-2", "nest-3"}

    # enqueued inside the user's span from plain code (the executor) or a DBOSClient (a
    # RunEnqueuer), run by a worker: under DBOS's span of its workflow, right under the
    # user's span (helix enqueues in PropagateOtelContext)
    for session in ("nest-1", "nest-3"):
        dbos_run = by_id[by_session[session]["parent_id"]]
        assert dbos_run["name"] == "helix_agent_run" and dbos_run["parent_id"] == request["context"]["span_id"]
        session_trace = format(session_span_context(session).trace_id, "032x")
        assert by_session[session]["attributes"]["helix.session.trace_id"] == session_trace

    # started from the user's own DBOS workflow: under DBOS's span of the run's workflow,
    # right under the user's workflow, inside the user's span
    assert _ancestors(by_id, by_session["nest-2"]) == ["helix_agent_run", "user_flow", "user-request"]

    # the sub-agent's run, under DBOS's span of its workflow, under the call that started it
    [call] = [s for s in spans if s["name"] == "invoke_agent obs-researcher" and "gen_ai.tool.call.id" in s["attributes"]]
    [dbos_child] = children(call)
    assert not _helix(dbos_child)
    [child_run] = children(dbos_child, "invoke_agent obs-researcher")
    assert child_run["attributes"]["helix.parent_session_id"] == "nest-1"

    # each model call made, inside DBOS's span of its step, inside helix's agent step
    models = [s for s in spans if s["name"] == "chat mock"]
    assert len(models) == 5  # nest-1: 2 steps and the sub-agent's 1; nest-2 and nest-3: 1 each
    for model in models:
        dbos_step = by_id[model["parent_id"]]
        assert not _helix(dbos_step) and by_id[dbos_step["parent_id"]]["name"].startswith("agent_step ")


@pytest.mark.parametrize("dbos_tracing", [False, True], ids=["dbos-tracing-off", "dbos-tracing-on"])
def test_runs_started_in_process_nest_under_the_callers_span(make_database: Any, phoenix: str, dbos_tracing: bool) -> None:
    """``execute`` and ``execute_async`` in the caller's own process (no queue, no worker),
    inside its span: each run right under it (DBOS's tracing off), or under DBOS's span of
    its workflow right under it (on); a run nested in the caller's trace names its session's."""
    url = make_database()
    migrate(url)
    session = f"inline-{dbos_tracing}"
    env = {"HELIX_OBS_OTLP": f"{phoenix}/v1/traces", "HELIX_OBS_URL": url, "HELIX_OBS_SESSION": session,
           **({"HELIX_OBS_DBOS_TRACING": "1"} if dbos_tracing else {})}
    caller = subprocess.run([sys.executable, "obs_in_process.py"], cwd=HERE, capture_output=True, text=True,
                            timeout=180, env={**os.environ, **env})
    assert caller.returncode == 0, caller.stderr[-3000:]
    trace_id = caller.stdout.split("trace ")[-1].strip()

    def ready(spans: list[dict[str, Any]]) -> bool:  # the two runs and the sub-agent's
        return sum(s["name"].startswith("invoke_agent ") and "helix.run" in s["attributes"] for s in spans) == 3

    spans = spans_when(phoenix, trace_id, ready, "the in-process runs in Phoenix")
    by_id, children = span_tree(spans)
    [request] = [s for s in spans if s["name"] == "user-request"]
    runs = {s["attributes"]["helix.session_id"]: s for s in spans
            if s["name"] == "invoke_agent obs-assistant" and "helix.run" in s["attributes"]}
    assert set(runs) == {f"{session}-sync", f"{session}-async"}
    for session_id, run in runs.items():
        above = ["helix_agent_run", "user-request"] if dbos_tracing else ["user-request"]
        assert _ancestors(by_id, run) == above, session_id
        assert run["attributes"]["helix.session.trace_id"] == format(session_span_context(session_id).trace_id, "032x")

    # the async run's two lookups and the sync run's sub-agent call, in their runs' steps;
    # the sub-agent's run under its call (DBOS's tracing on: under DBOS's span of its workflow)
    lookups = [s for s in spans if s["name"] == "execute_tool lookup"]
    assert len(lookups) == 2 and all(_run_of(by_id, s) is runs[f"{session}-async"] for s in lookups)
    [call] = [s for s in spans if s["name"] == "invoke_agent obs-researcher" and "gen_ai.tool.call.id" in s["attributes"]]
    assert by_id[call["parent_id"]]["parent_id"] == runs[f"{session}-sync"]["context"]["span_id"]
    [child_run] = [s for s in spans if s["name"] == "invoke_agent obs-researcher" and "helix.run" in s["attributes"]]
    between = ["helix_agent_run"] if dbos_tracing else []
    assert _ancestors(by_id, child_run)[: len(between) + 1] == [*between, call["name"]]

    # each model call in its agent step (DBOS's tracing on: inside DBOS's span of its step)
    for model in (s for s in spans if s["name"] == "chat mock"):
        step = by_id[model["parent_id"]]
        if dbos_tracing:
            assert not _helix(step)
            step = by_id[step["parent_id"]]
        assert step["name"].startswith("agent_step ")


def test_dbos_span_of_an_in_process_run_recovered_elsewhere_stays_under_the_callers_span(
    make_database: Any, phoenix: str
) -> None:
    """DBOS's tracing on: the caller starts a run in its own process inside its span and is
    SIGKILLed in the run's slow tool; a worker adopts and recovers the run. DBOS's span of
    the recovered workflow still nests under the caller's span (helix starts the run in
    ``PropagateOtelContext``, which DBOS keeps with the workflow), and the run under it."""
    url = make_database()
    migrate(url)
    env = {"HELIX_OBS_OTLP": f"{phoenix}/v1/traces", "HELIX_OBS_DBOS_TRACING": "1", "HELIX_OBS_URL": url,
           "HELIX_OBS_SESSION": "adopted", "HELIX_LEASE_TTL": "3", "HELIX_OBS_SLOW_SECONDS": "30"}
    caller = subprocess.Popen([sys.executable, "obs_in_process.py", "slow"], cwd=HERE, stdout=subprocess.PIPE,
                              text=True, env={**os.environ, **env})
    work = None
    try:
        assert caller.stdout is not None
        _, trace_id, span_id = caller.stdout.readline().split()
        until(lambda: slow_called(url, "adopted-slow"), "the caller's run to call the slow tool")
        caller.kill()
        caller.wait()
        work = worker(url, env={**env, "HELIX_OBS_SLOW_SECONDS": "0.2"})
        until(lambda: run_completed(url, "adopted-slow", 1), "the worker to recover the run", timeout=120)
    finally:
        caller.kill()
        stop_all(work)

    def ready(spans: list[dict[str, Any]]) -> bool:  # DBOS's span ends, and is exported, after the run's
        ids = {s["context"]["span_id"] for s in spans}
        return any(
            s["name"] == "invoke_agent obs-assistant" and s["attributes"].get("helix.recovered") and s["parent_id"] in ids
            for s in spans
        )

    spans = spans_when(phoenix, trace_id, ready, "the recovered run, and the span it nests in, in the caller's trace")
    by_id, _ = span_tree(spans)
    [recovered] = [s for s in spans if s["name"] == "invoke_agent obs-assistant" and s["attributes"]["helix.recovered"]]
    dbos_run = by_id.get(recovered["parent_id"], {})  # not the caller's span: it was never exported
    assert dbos_run.get("name") == "helix_agent_run" and dbos_run["parent_id"] == span_id


def _run_of(by_id: dict[str, dict[str, Any]], span: dict[str, Any]) -> dict[str, Any] | None:
    """The run span of ``span``'s nearest agent step."""
    while not span["name"].startswith("agent_step "):
        if (span := by_id.get(span["parent_id"] or "")) is None:
            return None
    return by_id.get(span["parent_id"] or "")


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
        start_run(f"http://127.0.0.1:{port}", "obs-lead", word, session)

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
