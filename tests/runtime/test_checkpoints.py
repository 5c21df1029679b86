"""A step's checkpoint is DBOS's, as the step returned it: helix writes nothing into DBOS's
rows, and the step's events reach the stream once, published after the checkpoint is
saved. A step commit that does not end the run leaves ``sessions.updated_at`` alone (its
update is HOT); the run's last commit moves it. A checkpoint leaves out the fields at
their defaults, and reads back the same."""

from __future__ import annotations

import json
from typing import Any

import pytest
from dbos import DBOS
from pydantic import BaseModel
from runtime_testkit import RESULT_TIMEOUT, Gate, call, calls, events, rows, text, unique, use_model, wait_for

from helix_dbos import ToolContext, define_agent, define_tool
from helix_dbos._durable.payloads import (
    ToolOutcome,
    checkpoint_json,
    llm_output,
    run_workflow_id,
    tool_checkpoint,
    tool_outcome,
)
from helix_dbos.types import (
    ErrorStepResult,
    ParsedToolCall,
    StructuredOutputStepResult,
    TextStepResult,
    ThinkingContent,
    ToolCallsStepResult,
    Usage,
)


class Note(BaseModel):
    text: str


def note(i: Note, ctx: ToolContext) -> dict[str, Any]:
    return {"noted": i.text}


NOTE = define_tool("note", "Take a note.", Note, note)


def test_checkpoints_are_dbos_s_own_and_every_event_is_in_the_stream_once(executor):
    use_model(executor, calls(call("a", "note", {"text": "x"}), call("b", "note", {"text": "y"}), content="two"),
              text("done"))
    handle = executor.execute(define_agent(unique("carried"), tools=[NOTE]), "go")
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    workflow_id = run_workflow_id(handle.session_id, 1)

    steps = {s["function_name"]: s["output"] for s in DBOS.list_workflow_steps(workflow_id)}
    assert set(steps["llm"]) == {"result", "usage"}
    assert steps["tool:note"]["tool_call_id"] in {"a", "b"} and "helix_events" not in steps["tool:note"]

    stored = events(executor, handle.session_id)
    assert [e["seq"] for e in stored] == list(range(1, len(stored) + 1))
    assert [(e["step"], e["type"]) for e in stored] == [
        (0, "run_start"),
        (1, "step_start"), (1, "text"), (1, "tool_call"), (1, "tool_call"), (1, "tool_result"), (1, "tool_result"),
        (1, "step_finish"),
        (2, "step_start"), (2, "text"), (2, "step_finish"), (2, "finish"),
    ]
    results = [e["data"]["tool_call_id"] for e in stored if e["type"] == "tool_result"]
    assert sorted(results) == ["a", "b"]


def test_a_step_commit_leaves_updated_at_alone_and_the_runs_last_commit_moves_it(executor):
    gate = Gate()
    use_model(executor, calls(call("a", "note", {"text": "x"})), calls(call("g", "wait_here")), text("done"))
    handle = executor.execute(define_agent(unique("hot"), tools=[NOTE, gate.tool()]), "go")
    gate.wait_entered()
    sid = handle.session_id

    def step_finished(step: int) -> Any:
        found = rows(executor, "SELECT created_at FROM helix.events WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %(s)s) AND step = %(n)s"
                     " AND type = 'step_finish'", s=sid, n=step)
        return found[0]["created_at"] if found else None

    committed_at = wait_for(lambda: step_finished(1), what="step 1's commit")
    updated = executor.get_session(sid).updated_at
    assert updated < committed_at, "a commit that does not end the run must not move updated_at"
    gate.open()
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    ended = rows(executor, "SELECT created_at FROM helix.events WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %(s)s) AND type = 'finish'", s=sid)
    assert executor.get_session(sid).updated_at == ended[0]["created_at"]


def test_a_keyed_write_reads_the_same_few_pages_however_long_the_stream(executor):
    """``helix.unwritten_events`` looks each key up in ``events_step_key_idx``: checking
    three keys reads a handful of pages, not the session's whole stream."""
    use_model(executor, text("done"))
    handle = executor.execute(define_agent(unique("long-stream")), "go")
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    sid = handle.session_id
    keys = json.dumps([{"type": "custom", "data": {}, "key": f"1.1.k{i}"} for i in range(3)])

    def pages_read() -> int:
        """The fewest pages the check reads in four calls on one connection: a call that plans
        the function's statements (the first, or one after autovacuum analyzed the table)
        also reads the catalogs."""
        explain = (
            "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)"
            " SELECT helix.unwritten_events(s.num, 1, CAST(%(e)s AS jsonb)) FROM helix.sessions s WHERE s.id = %(s)s"
        )
        with executor.pool.connection() as conn:
            plans = [conn.execute(explain, {"s": sid, "e": keys}).fetchone()[0] for _ in range(4)]
        tops = [plan[0]["Plan"] for plan in plans]
        return min(int(top["Shared Hit Blocks"]) + int(top["Shared Read Blocks"]) for top in tops)

    short = pages_read()
    with executor.pool.connection() as conn, conn.transaction():  # 20,000 keyed events of step 1 after the run's own
        grown = conn.execute(
            "INSERT INTO helix.events (session_num, seq, run, step, type, data, key)"
            " SELECT s.num, s.event_seq + g, 1, 1, 'custom', jsonb_build_object('i', g), '1.1.filler' || g"
            " FROM helix.sessions s, generate_series(1, 20000) AS g WHERE s.id = %(s)s", {"s": sid}
        ).rowcount
        conn.execute("ANALYZE helix.events")  # the planner knows the stream grew (as autovacuum would tell it)
    assert grown == 20000
    long = pages_read()
    assert long <= short + 10, f"{long} pages read at 20,000 events against {short} at a few"


def test_the_functions_every_step_calls_keep_their_plans_on_the_connection(executor):
    """A SQL-language function whose body reads a table (and is not inlined) is planned again
    by every statement that calls it (``helix.unwritten_events`` took 0.32 ms a call so,
    0.13 ms as plpgsql; ``helix.last_event_seq`` 0.06 and 0.03);
    the functions each step calls, from the event writer and in the step commit, are
    plpgsql, whose plans stay on the connection."""
    per_step = [
        "commit_step", "append_events_once", "unwritten_events", "insert_events", "insert_messages",
        "insert_state_patch", "last_event_seq",
    ]
    found = rows(
        executor,
        "SELECT p.proname, l.lanname FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang"
        " JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'helix' AND p.proname = ANY(%(names)s)",
        names=per_step,
    )
    assert {r["proname"]: r["lanname"] for r in found} == dict.fromkeys(per_step, "plpgsql")


@pytest.mark.parametrize("result", [
    TextStepResult(content="hi", thinking=ThinkingContent(content="hm"), should_stop=True, stop_reason="end_turn"),
    ToolCallsStepResult(tool_calls=[ParsedToolCall(id="a", name="t", arguments={"x": None}),
                                    ParsedToolCall(id="b", name="t", arguments="{bad", parse_error="bad JSON")]),
    StructuredOutputStepResult(output=None),
    StructuredOutputStepResult(output={"answer": 0}),
    ErrorStepResult(error="rate limited", should_stop=False),
], ids=lambda r: r.type)
def test_an_llm_checkpoint_leaves_out_defaults_and_reads_back_the_same(result):
    usage = Usage(input_tokens=3, total_tokens=3)
    checkpoint = {"result": checkpoint_json(result), "usage": checkpoint_json(usage)}
    assert checkpoint["result"]["type"] == result.type
    assert checkpoint["usage"] == {"input_tokens": 3, "total_tokens": 3}
    assert llm_output(json.loads(json.dumps(checkpoint))) == (result, usage)


def test_a_tool_checkpoint_leaves_out_defaults_and_reads_back_the_same():
    call = ParsedToolCall(id="a", name="t", arguments={})
    plain = ToolOutcome(tool_call_id="a", tool_name="t", success=True, result={"ok": 1})
    assert tool_checkpoint(plain) == {"tool_call_id": "a", "result": {"ok": 1}}, "the step's name says the tool"
    unusual = ToolOutcome(tool_call_id="a", tool_name="t", success=False, result=None, error="denied", executed=False,
                          writes=[{"op": "set", "path": ["x"], "value": None}], ms=1.5)
    for outcome in (plain, unusual):
        assert tool_outcome(call, json.loads(json.dumps(tool_checkpoint(outcome)))) == outcome


def test_a_tool_checkpoint_says_success_only_when_false():
    failed = ToolOutcome(tool_call_id="a", tool_name="t", success=False, error="no", ms=0.5)
    assert tool_checkpoint(failed) == {"tool_call_id": "a", "success": False, "error": "no", "ms": 0.5}


def test_a_tool_checkpoint_without_the_call_s_id_or_the_tool_s_name_reads_as_if_it_had_them():
    """What the step says (the call, the tool) is filled in."""
    call = ParsedToolCall(id="a", name="t", arguments={})
    assert tool_outcome(call, {"result": {"ok": 1}}) == ToolOutcome(
        tool_call_id="a", tool_name="t", success=True, result={"ok": 1})
    assert tool_outcome(call, {"tool_call_id": "a", "success": False, "error": "no"}).success is False


def test_a_tool_checkpoint_with_every_field_reads_the_same():
    call = ParsedToolCall(id="a", name="t", arguments={})
    whole = {"tool_call_id": "a", "tool_name": "t", "success": True, "result": {"ok": 1}, "ms": 0.25}
    assert tool_outcome(call, whole) == ToolOutcome(
        tool_call_id="a", tool_name="t", success=True, result={"ok": 1}, ms=0.25)
