"""``helix-dbos prune`` / ``admin.prune``: finished session trees go with their DBOS
workflows, in batches; nothing of a live session is touched.

The database is the runtime suite's, shared with other modules: each test checks its own
sessions, and prunes with a cutoff taken after its old sessions finished.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from dbos import DBOS
from pydantic import BaseModel
from runtime_testkit import (
    RESULT_TIMEOUT,
    Gate,
    agent,
    call,
    calls,
    cli,
    family_model,
    rows,
    sub,
    text,
    unique,
    use_model,
    wait_for,
)

from helix_dbos import ApprovalResponse, create_sub_agent_tool, define_agent, define_tool
from helix_dbos import admin

TABLES = (
    "runs", "messages", "events", "state_patches", "state_snapshots",
    "pending_tool_calls", "tool_call_answers", "tool_outcomes", "tool_attempts",
)


class Empty(BaseModel):
    pass


def footprint(executor: Any, session_id: str) -> dict[str, int]:
    """How many rows of each helix table belong to the session, and of its DBOS workflows."""
    counts = {"sessions": len(rows(executor, "SELECT 1 FROM helix.sessions WHERE id = %(s)s", s=session_id))}
    for table in TABLES:
        counts[table] = len(rows(executor, f"SELECT 1 FROM helix.{table} t JOIN helix.sessions s ON s.num = t.session_num"
                                           " WHERE s.id = %(s)s", s=session_id))
    pattern = f"helix:{session_id}:run:%"
    counts["workflows"] = len(rows(executor, "SELECT 1 FROM dbos.workflow_status WHERE workflow_uuid LIKE %(p)s", p=pattern))
    counts["steps"] = len(rows(executor, "SELECT 1 FROM dbos.operation_outputs WHERE workflow_uuid LIKE %(p)s", p=pattern))
    return counts


def now(executor: Any) -> Any:
    return rows(executor, "SELECT now() AS t")[0]["t"]


def finished_session(executor: Any, **options: Any) -> str:
    use_model(executor, calls(call("t1", "note")), text("done"))
    note = define_tool("note", "Take a note.", Empty, lambda _args, ctx: {"ok": True})
    handle = executor.execute(define_agent(unique("old"), tools=[note], **options), "go")
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    return handle.session_id


def family_session(executor: Any) -> tuple[str, str]:
    child = agent(unique("child"))
    parent = agent(unique("parent"), tools=[create_sub_agent_tool(child)])
    family_model(executor, {
        parent: [calls(call("p1", f"subagent__{child.name}", {"input": "go"})), text("parent done")],
        child: [text("child done")],
    })
    handle = executor.execute(parent, "go")
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    return handle.session_id, sub(handle.session_id, "p1")


def test_prune_removes_old_finished_trees_with_their_workflows_and_nothing_live(executor):
    old = [finished_session(executor) for _ in range(2)]
    parent, child = family_session(executor)
    assert all(footprint(executor, sid)["workflows"] == 1 for sid in [*old, parent, child])

    gate = Gate()  # a live tree: the child still runs, the parent waits for it
    busy_child = agent(unique("busy-child"), tools=[gate.tool()])
    busy_parent = agent(unique("busy-parent"), tools=[create_sub_agent_tool(busy_child)])
    family_model(executor, {
        busy_parent: [calls(call("b1", f"subagent__{busy_child.name}", {"input": "go"})), text("done")],
        busy_child: [calls(call("g1", "wait_here")), text("child done")],
    })
    live = executor.execute(busy_parent, "go")
    gate.wait_entered()
    refund = define_tool("refund", "Refund.", Empty, lambda _args, ctx: {"ok": True}, require_approval=True)
    use_model(executor, calls(call("r1", "refund")), text("refunded"))
    waiting = executor.execute(define_agent(unique("waiting"), tools=[refund]), "go")
    wait_for(lambda: executor.list_pending(waiting.session_id), what="the approval request")
    wait_for(lambda: executor.get_current_run(waiting.session_id).workflow_id.endswith(":wait:1"), what="the run parked")
    cutoff = now(executor)
    recent = finished_session(executor)
    kept = [live.session_id, sub(live.session_id, "b1"), waiting.session_id, recent]
    before = {sid: footprint(executor, sid) for sid in kept}

    dry = admin.prune(executor.database_url, cutoff, dry_run=True)
    assert dry.dry_run and {*old, parent} <= set(dry.roots) and not set(kept) & set(dry.roots)
    assert all(footprint(executor, sid)["sessions"] == 1 for sid in [*old, parent, child])  # nothing removed

    report = admin.prune(executor.database_url, cutoff)

    assert {*old, parent} <= set(report.roots) and child not in report.roots  # a child goes with its root
    assert not set(kept) & set(report.roots)
    assert report.sessions >= 4 and report.workflows >= 4
    for sid in [*old, parent, child]:
        assert set(footprint(executor, sid).values()) == {0}, sid
        assert DBOS.list_workflows(workflow_ids=[f"helix:{sid}:run:1"]) == []
    assert {sid: footprint(executor, sid) for sid in kept} == before  # every row of a live session stays
    assert admin.prune(executor.database_url, cutoff).roots == []  # twice: nothing more to do

    gate.open()
    assert live.result(timeout=RESULT_TIMEOUT).status == "completed"
    executor.submit_tool_result(waiting.session_id, ApprovalResponse(tool_call_id="r1", approved=True))
    assert waiting.result(timeout=RESULT_TIMEOUT).status == "completed"
    assert footprint(executor, waiting.session_id)["workflows"] == 3  # the run, its waiter, its continuation
    assert waiting.session_id in admin.prune(executor.database_url, now(executor)).roots
    assert set(footprint(executor, waiting.session_id).values()) == {0}


def test_prune_works_in_batches_and_keeps_interrupted_sessions(executor):
    old = [finished_session(executor) for _ in range(5)]
    gate = Gate()
    use_model(executor, calls(call("w1", "wait_here")), text("never"))
    paused = executor.execute(define_agent(unique("paused"), tools=[gate.tool()]), "go")
    gate.wait_entered()
    executor.interrupt(paused.session_id)
    gate.open()
    assert paused.result(timeout=RESULT_TIMEOUT).status == "interrupted"
    cutoff = now(executor)

    report = admin.prune(executor.database_url, cutoff, batch_size=2)

    assert set(old) <= set(report.roots) and paused.session_id not in report.roots
    assert report.batches == -(-len(report.roots) // 2) and report.batches >= 3
    assert all(footprint(executor, sid)["sessions"] == 0 for sid in old)
    assert footprint(executor, paused.session_id)["sessions"] == 1


def test_the_cli_prunes_with_a_duration_and_reports_a_dry_run(executor):
    old = finished_session(executor)

    dry = json.loads(cli(executor, "prune", "--completed-before", "0s", "--dry-run", "--json").stdout)
    assert dry["dry_run"] is True and old in dry["roots"]
    assert footprint(executor, old)["sessions"] == 1
    assert cli(executor, "prune", "--completed-before", "30d").stdout.startswith("removed 0 session trees")
    done = cli(executor, "prune", "--completed-before", "0s").stdout

    assert done.startswith("removed ") and f"  {old}\n" in done
    assert set(footprint(executor, old).values()) == {0}


def test_a_bad_cutoff_or_batch_size_is_one_clear_line(executor):
    bad = cli(executor, "prune", "--completed-before", "3 fortnights", expect=1)
    assert "neither a duration (30d, 12h, 90m, 45s) nor an ISO time" in bad.stderr

    assert admin.prune(executor.database_url, timedelta(days=365 * 100), dry_run=True).roots == []
