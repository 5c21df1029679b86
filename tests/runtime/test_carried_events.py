"""A step's events ride in its checkpoint (store/sql/012, ``durable/step_events.py``): the
LLM step and each tool step return their events first in their output, and helix's
trigger on ``dbos.operation_outputs`` writes them to the stream in DBOS's own checkpoint
transaction and saves the output without them. DBOS's tools then show plain outputs,
every event is in the stream once, a second insert carrying the same events writes
nothing, an output whose session is gone is saved without its events, and an output
that only looks like one (the key not holding carried events) is saved as it came. A step commit
that does not end the run leaves ``sessions.updated_at`` alone (its update is HOT); the
run's last commit moves it. Carried events leave the session row as it was (store/sql/013):
the next writer numbers its events after them and brings ``event_seq`` level. A checkpoint
leaves out the fields at their defaults, and reads back the same."""

from __future__ import annotations

import json
from typing import Any

import pytest
import sqlalchemy as sa
from dbos import DBOS
from pydantic import BaseModel
from runtime_testkit import RESULT_TIMEOUT, Gate, call, calls, events, rows, text, unique, use_model, wait_for

from helix_dbos import ToolContext, define_agent, define_tool
from helix_dbos.durable.requests import ToolOutcome, run_workflow_id
from helix_dbos.durable.steps import checkpoint_json, llm_output, tool_checkpoint, tool_outcome
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


def carried_output(session_id: str, run: int, step: int, key: str, **result: Any) -> str:
    """A step output that carries one ``custom`` event, as a step body returns it."""
    event = {"type": "custom", "data": {"name": "probe", "data": key}, "key": f"{run}.{step}.{key}"}
    carried = {"session_id": session_id, "run": run, "step": step, "events": [event]}
    return json.dumps({"helix_events": carried, **result}, separators=(",", ":"))


def insert_output(executor: Any, workflow_id: str, function_id: int, output: str) -> str:
    """Insert a step output as DBOS does; return it as saved."""
    with executor.engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO dbos.operation_outputs (workflow_uuid, function_id, function_name, output, serialization)"
                " VALUES (:w, :f, 'probe', :o, 'portable_json')"
            ),
            {"w": workflow_id, "f": function_id, "o": output},
        )
        return str(conn.execute(
            sa.text("SELECT output FROM dbos.operation_outputs WHERE workflow_uuid = :w AND function_id = :f"),
            {"w": workflow_id, "f": function_id},
        ).scalar_one())


def test_checkpoints_are_saved_without_their_events_and_every_event_is_in_the_stream_once(executor):
    use_model(executor, calls(call("a", "note", {"text": "x"}), call("b", "note", {"text": "y"}), content="two"),
              text("done"))
    handle = executor.execute(define_agent(unique("carried"), tools=[NOTE]), "go")
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    workflow_id = run_workflow_id(handle.session_id, 1)

    steps = {s["function_name"]: s["output"] for s in DBOS.list_workflow_steps(workflow_id)}
    assert set(steps["llm"]) == {"result", "usage"}
    assert steps["tool:note"]["tool_call_id"] in {"a", "b"} and "helix_events" not in steps["tool:note"]
    carrying = rows(executor, "SELECT count(*) AS n FROM dbos.operation_outputs WHERE workflow_uuid = :w"
                    " AND output LIKE '%helix_events%'", w=workflow_id)
    assert carrying[0]["n"] == 0

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


def test_the_trigger_writes_carried_events_once_and_drops_those_of_a_session_that_is_gone(executor):
    use_model(executor, text("done"))
    handle = executor.execute(define_agent(unique("probe")), "go")
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    sid, workflow_id = handle.session_id, run_workflow_id(handle.session_id, 1)
    before = events(executor, sid)

    saved = insert_output(executor, workflow_id, 901, carried_output(sid, 1, 1, "probe", answer=1))
    again = insert_output(executor, workflow_id, 902, carried_output(sid, 1, 1, "probe", answer=2))
    gone = insert_output(executor, workflow_id, 903, carried_output("no-such-session", 1, 1, "probe", answer=3))
    nested = json.dumps({"helix_events": "not ours", "x": {"helix_events": {"session_id": sid}}}, separators=(",", ":"))
    untouched = insert_output(executor, workflow_id, 904, nested)

    assert [json.loads(o) for o in (saved, again, gone)] == [{"answer": 1}, {"answer": 2}, {"answer": 3}]
    assert untouched == nested
    after = events(executor, sid)
    assert after[: len(before)] == before and len(after) == len(before) + 1
    assert (after[-1]["seq"], after[-1]["type"], after[-1]["data"]["data"]) == (before[-1]["seq"] + 1, "custom", "probe")
    assert rows(executor, "SELECT count(*) AS n FROM helix.events WHERE session_id = 'no-such-session'")[0]["n"] == 0


def test_a_step_commit_leaves_updated_at_alone_and_the_runs_last_commit_moves_it(executor):
    gate = Gate()
    use_model(executor, calls(call("a", "note", {"text": "x"})), calls(call("g", "wait_here")), text("done"))
    handle = executor.execute(define_agent(unique("hot"), tools=[NOTE, gate.tool()]), "go")
    gate.wait_entered()
    sid = handle.session_id

    def step_finished(step: int) -> Any:
        found = rows(executor, "SELECT created_at FROM helix.events WHERE session_id = :s AND step = :n"
                     " AND type = 'step_finish'", s=sid, n=step)
        return found[0]["created_at"] if found else None

    committed_at = wait_for(lambda: step_finished(1), what="step 1's commit")
    updated = executor.get_session(sid).updated_at
    assert updated < committed_at, "a commit that does not end the run must not move updated_at"
    gate.open()
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    ended = rows(executor, "SELECT created_at FROM helix.events WHERE session_id = :s AND type = 'finish'", s=sid)
    assert executor.get_session(sid).updated_at == ended[0]["created_at"]


def test_a_keyed_write_reads_the_same_few_pages_however_long_the_stream(executor):
    """``helix.unwritten_events`` looks each key up in ``stream_step_key_idx``: checking
    three keys reads a handful of pages, not the session's whole stream (store/sql/012, 014)."""
    use_model(executor, text("done"))
    handle = executor.execute(define_agent(unique("long-stream")), "go")
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    sid = handle.session_id
    keys = json.dumps([{"type": "custom", "data": {}, "key": f"1.1.k{i}"} for i in range(3)])

    def pages_read() -> int:
        """Pages the check reads, the second time on a connection (the first also plans it)."""
        explain = sa.text(
            "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)"
            " SELECT helix.unwritten_events(s.num, 1, CAST(:e AS jsonb)) FROM helix.sessions s WHERE s.id = :s"
        )
        with executor.engine.connect() as conn:
            plans = [conn.execute(explain, {"s": sid, "e": keys}).scalar_one() for _ in range(2)]
        top = plans[-1][0]["Plan"]
        return int(top["Shared Hit Blocks"]) + int(top["Shared Read Blocks"])

    short = pages_read()
    many = json.dumps([{"type": "custom", "data": {"i": i}, "key": f"1.1.filler{i}"} for i in range(2000)])
    with executor.engine.begin() as conn:
        conn.execute(sa.text("SELECT helix.append_events_once(:s, 1, 1, CAST(:e AS jsonb))"), {"s": sid, "e": many})
    long = pages_read()
    assert long <= short + 10, f"{long} pages read at 2,000 events against {short} at a few"


def test_the_functions_every_step_calls_keep_their_plans_on_the_connection(executor):
    """A SQL-language function whose body reads a table (and is not inlined) is planned again
    by every statement that calls it (``helix.unwritten_events`` took 0.32 ms a call so,
    0.13 ms as plpgsql; ``helix.last_event_seq`` 0.06 and 0.03);
    the functions each step calls, in DBOS's checkpoint transactions and in the step
    commit, are plpgsql, whose plans stay on the connection (store/sql/functions/)."""
    per_step = [
        "commit_step", "write_carried_events", "insert_unwritten_events", "unwritten_events", "insert_events",
        "last_event_seq",
    ]
    found = rows(
        executor,
        "SELECT p.proname, l.lanname FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang"
        " JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'helix' AND p.proname = ANY(:names)",
        names=per_step,
    )
    assert {r["proname"]: r["lanname"] for r in found} == dict.fromkeys(per_step, "plpgsql")


def test_carried_events_leave_the_session_row_alone_and_the_next_writer_numbers_after_them(executor):
    use_model(executor, text("done"))
    handle = executor.execute(define_agent(unique("tip")), "go")
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    sid, workflow_id = handle.session_id, run_workflow_id(handle.session_id, 1)

    def session_row() -> dict[str, Any]:
        """The row's version (a new one on every UPDATE) and its event_seq."""
        return rows(executor, "SELECT xmin::text AS version, event_seq FROM helix.sessions WHERE id = :s", s=sid)[0]

    last = events(executor, sid)[-1]["seq"]
    before = session_row()
    assert before["event_seq"] == last
    insert_output(executor, workflow_id, 921, carried_output(sid, 1, 1, "tip1", answer=1))
    insert_output(executor, workflow_id, 922, carried_output(sid, 1, 1, "tip2", answer=2))
    assert session_row() == before, "a checkpoint's events must not write the session row"

    third = json.dumps([{"type": "custom", "data": {"name": "probe", "data": "tip3"}, "key": "1.1.tip3"}])
    with executor.engine.begin() as conn:
        conn.execute(sa.text("SELECT helix.append_events_once(:s, 1, 1, CAST(:e AS jsonb))"), {"s": sid, "e": third})
    stored = events(executor, sid)
    assert [e["seq"] for e in stored] == list(range(1, last + 4))
    assert [e["data"]["data"] for e in stored[-3:]] == ["tip1", "tip2", "tip3"]
    assert session_row()["event_seq"] == last + 3


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
    """What the step says (the call, the tool) is filled in; the next release may leave out the call's id too."""
    call = ParsedToolCall(id="a", name="t", arguments={})
    assert tool_outcome(call, {"result": {"ok": 1}}) == ToolOutcome(
        tool_call_id="a", tool_name="t", success=True, result={"ok": 1})
    assert tool_outcome(call, {"tool_call_id": "a", "success": False, "error": "no"}).success is False


def test_a_tool_checkpoint_of_the_release_before_reads_the_same():
    """Schema version 22 wrote each checkpoint whole; a run it started replays here."""
    call = ParsedToolCall(id="a", name="t", arguments={})
    whole = {"tool_call_id": "a", "tool_name": "t", "success": True, "result": {"ok": 1}, "ms": 0.25}
    assert tool_outcome(call, whole) == ToolOutcome(
        tool_call_id="a", tool_name="t", success=True, result={"ok": 1}, ms=0.25)
