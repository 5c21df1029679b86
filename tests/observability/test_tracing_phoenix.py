"""Traces of a session in a real trace backend: Arize Phoenix (``phoenix serve``, from
``.helix/phoenix-venv``, which scripts/test.sh installs) receives the spans of real
``helix-dbos worker`` processes over OTLP/HTTP; the test reads them back through
Phoenix's REST API and checks the session's tree.

One session, four runs: a parallel tool step; an approval wait (the run parks, the waiter
waits, the continuation resumes); a sub-agent; and a slow tool during which the worker
is SIGKILLed, so a second worker adopts and finishes the run.
"""

from __future__ import annotations

import time
from typing import Any

from helix_dbos import admin
from helix_dbos.observability import session_span_context
from helix_dbos._store.migrations import migrate
from obs_kit import (
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

SESSION = "trace-me"


def test_a_session_with_four_runs_a_wait_a_sub_agent_and_a_crash_is_one_trace(make_database: Any, phoenix: str) -> None:
    url = make_database()
    migrate(url)
    env = {"HELIX_OBS_OTLP": f"{phoenix}/v1/traces", "HELIX_OBS_SLOW_SECONDS": "30"}
    port = free_port()
    first = worker(url, env=env)
    serve = server(url, port)
    second = None
    api = f"http://127.0.0.1:{port}"

    def start(word: str) -> None:
        start_run(api, "obs-assistant", word, SESSION)

    try:
        for run, word in enumerate(("tools", "approve", "delegate"), start=1):
            start(word)
            if word == "approve":
                [call] = until(lambda: admin.list_pending(url, SESSION), "the approval request")
                time.sleep(0.5)  # a wait the trace shows
                admin.approve(url, SESSION, call.tool_call_id)
            until(lambda: run_completed(url, SESSION, run), f"run {word!r} to complete")
        start("slow")
        until(lambda: slow_called(url, SESSION), "the model to call the slow tool", timeout=60)
        time.sleep(1.5)  # the tool runs (30 s)
        second = crash_and_replace(first, url, env)  # SIGKILL in the middle of the slow tool
        until(lambda: run_completed(url, SESSION, 4), "the crashed run to complete on the second worker", timeout=120)
    finally:
        stop_all(serve, first, second)

    trace_id = format(session_span_context(SESSION).trace_id, "032x")
    spans = spans_when(phoenix, trace_id, lambda spans: len(spans) >= 30, "the spans in Phoenix")
    by_id, children = span_tree(spans)
    root_id = format(session_span_context(SESSION).span_id, "016x")

    runs = [s for s in spans if s["name"] == "invoke_agent obs-assistant" and s["parent_id"] == root_id]
    assert sorted((s["attributes"]["helix.run"], s["attributes"]["helix.continued"]) for s in runs
                  if not s["attributes"]["helix.recovered"]) == [(1, False), (2, False), (2, True), (3, False)]

    # run 1: one step with two lookups side by side, then a text step; each step commits
    run1 = next(s for s in runs if s["attributes"]["helix.run"] == 1)
    step1 = children(run1, "agent_step 1")[0]
    lookups = children(step1, "execute_tool lookup")
    assert len(lookups) == 2
    assert max(s["start_time"] for s in lookups) < min(s["end_time"] for s in lookups)  # in parallel
    assert [s["attributes"]["gen_ai.operation.name"] for s in children(step1) if s["name"].startswith("chat")] == ["chat"]
    assert children(step1, "helix.commit")

    # run 2: parks at its step (suspended), the waiter waits, the continuation resumes approved
    parked = next(s for s in runs if s["attributes"]["helix.run"] == 2 and not s["attributes"]["helix.continued"])
    assert parked["attributes"]["helix.run.outcome"] == "suspended"
    assert [e["name"] for e in parked["events"]] == ["helix.suspended"]
    [waits] = [s for s in spans if s["name"] == "helix.wait"]
    assert waits["attributes"]["helix.wait.outcome"] == "answered"
    continued = next(s for s in runs if s["attributes"]["helix.run"] == 2 and s["attributes"]["helix.continued"])
    [resumed] = [e for e in continued["events"] if e["name"] == "helix.resumed"]
    assert resumed["attributes"]["helix.calls.approved"]
    assert continued["start_time"] > waits["start_time"]
    assert any(children(step, "execute_tool transfer") for step in children(continued))

    # run 3: the sub-agent's run nests under the call that started it
    [call] = [s for s in spans if s["name"] == "invoke_agent obs-researcher" and "gen_ai.tool.call.id" in s["attributes"]]
    [child_run] = children(call, "invoke_agent obs-researcher")
    assert child_run["attributes"]["helix.parent_session_id"] == SESSION
    assert children(child_run, "agent_step 1")

    # run 4: killed in the slow tool; the recovered execution runs the tool again (once
    # more, one span: the killed one never ended) and does not call the model again
    recovered = [s for s in runs if s["attributes"]["helix.recovered"]]
    assert [s["attributes"]["helix.run"] for s in recovered] == [4]
    slow = [s for s in spans if s["name"] == "execute_tool slow"]
    assert len(slow) == 1 and by_id[slow[0]["parent_id"]]["parent_id"] == recovered[0]["context"]["span_id"]
    run4_models = [s for s in spans if s["name"] == "chat mock"
                   and by_id.get(s["parent_id"], {}).get("parent_id") == recovered[0]["context"]["span_id"]]
    # step 1's call, made before the crash and replayed after it (one span, exported by the
    # killed worker, under the recovered step: the same span ids), and step 2's
    assert len(run4_models) == 2
