"""The step commit is a plain transaction, not a DBOS step (``helix.commit_step``): calling it again
for a step its run committed already (what a replay does) writes nothing and answers what
the first call answered, interrupted or not; a step that is not the next one is refused,
writing nothing. It sets the status Python decided (``orchestration/status.py``), and a
worker of the previous release, which does not send it, gets the same. The SIGKILL between a commit and the next checkpoint is a kill point of
tests/crash/test_crash_recovery.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runtime_testkit import RESULT_TIMEOUT, Gate, call, calls, events, rows, text, unique, use_model, wait_for

from helix_dbos import define_agent
from helix_dbos.events import StepFinishEvent, StepStartEvent
from helix_dbos._store.records import CommitOutcome, KeyedEvent, StepCommit, Terminal
from helix_dbos.types import AssistantMessage


def counts(executor: Any, session_id: str) -> dict[str, int]:
    """How many rows the session has in each table a commit writes to."""
    where = {
        "messages": "helix.messages WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %(s)s)",
        "events": "helix.events WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %(s)s)",
        "state_patches": "helix.state_patches WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %(s)s)",
        "usage": "helix.session_usage(%(s)s)",
    }
    return {table: rows(executor, f"SELECT count(*) AS n FROM {rows_of}", s=session_id)[0]["n"]
            for table, rows_of in where.items()}


def again(session_id: str, run: int, step: int) -> StepCommit:
    """A commit of ``step`` as a replay would make it (here with different content: a
    replay's is the same, and none of it may be written)."""
    return StepCommit(
        session_id=session_id, run=run, step=step, messages=[AssistantMessage(content="written twice?")],
        patch=[{"op": "add", "path": "/x", "value": 1}],
        events=[KeyedEvent.at(run, step, "step_finish",
                              StepFinishEvent(step=step, usage={"model": "m", "total_tokens": 5, "tools": []}))],
    )


def test_committing_a_committed_step_again_writes_nothing_and_answers_as_the_first_time(executor):
    use_model(executor, text("done"))
    handle = executor.execute(define_agent(unique("commit-again"), system_prompt="s"), "hi")
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    before = counts(executor, handle.session_id)

    outcome = executor.runtime.commit_step(again(handle.session_id, run=1, step=1))

    assert (outcome.replayed, outcome.interrupted, outcome.refused) == (True, False, None)
    assert counts(executor, handle.session_id) == before
    assert executor.get_session(handle.session_id).step_count == 1


def test_a_replayed_commit_of_the_step_an_interrupt_ended_still_says_interrupted(executor):
    gate = Gate()
    agent = define_agent(unique("commit-interrupted"), tools=[gate.tool()])
    use_model(executor, calls(call("g1", "wait_here")), text("end"))
    handle = executor.execute(agent, "go")
    gate.wait_entered()
    assert executor.interrupt(handle.session_id)
    gate.open()
    assert handle.result(timeout=RESULT_TIMEOUT).status == "interrupted"
    before = counts(executor, handle.session_id)

    outcome = executor.runtime.commit_step(again(handle.session_id, run=1, step=1))

    assert (outcome.replayed, outcome.interrupted) == (True, True)
    assert counts(executor, handle.session_id) == before
    keys = [r["key"] for r in rows(executor, "SELECT key FROM helix.events WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %(s)s) AND type = 'interrupted'",
                                   s=handle.session_id)]
    assert keys == ["1.1.interrupted"]


def test_a_step_that_is_not_the_next_one_is_refused_and_nothing_is_written(executor):
    use_model(executor, text("done"))
    handle = executor.execute(define_agent(unique("commit-refused"), system_prompt="s"), "hi")
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    before = counts(executor, handle.session_id)

    skipped = executor.runtime.commit_step(again(handle.session_id, run=1, step=5))
    other_run = executor.runtime.commit_step(again(handle.session_id, run=2, step=1))

    assert (skipped.refused, skipped.replayed) == ("completed", False)
    assert (other_run.refused, other_run.replayed) == ("completed", False)
    assert counts(executor, handle.session_id) == before


def test_a_fresh_commit_of_a_step_whose_events_the_stream_holds_writes_each_event_once(executor):
    """A commit that says its events are new (``fresh``) when the stream holds some of them
    (written live by another process, say) is refused by the stream's key index and made
    again, looking its keys up: every key once, seqs without a gap."""
    gate = Gate()
    use_model(executor, calls(call("g1", "wait_here")), text("end"))
    handle = executor.execute(define_agent(unique("commit-fresh"), tools=[gate.tool()]), "go")
    gate.wait_entered()
    sid = handle.session_id
    wait_for(lambda: any(e["type"] == "tool_call" for e in events(executor, sid)), what="the model's tool call, written live")
    executor.runtime.live_events.committing(sid, 1, 1)  # this process forgets it sent them, as another would not know
    known = KeyedEvent(key="1.1.call:g1", event=StepStartEvent(step=1))
    finish = KeyedEvent.at(1, 1, "step_finish", StepFinishEvent(step=1, usage={"model": "m", "total_tokens": 1, "tools": []}))

    outcome = executor.runtime.commit_step(StepCommit(session_id=sid, run=1, step=1, events=[known, finish], fresh=True))

    assert outcome == CommitOutcome()
    stream = rows(executor, "SELECT seq, key FROM helix.events WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %(s)s)"
                            " ORDER BY seq", s=sid)
    keys = [r["key"] for r in stream if r["key"] is not None]
    assert sorted(keys) == sorted(set(keys)) and keys.count("1.1.call:g1") == 1 and "1.1.step_finish" in keys
    assert [r["seq"] for r in stream] == list(range(1, len(stream) + 1))
    assert executor.get_session(sid).step_count == 1
    gate.open()
    handle.result(timeout=RESULT_TIMEOUT)


def test_a_committed_step_leaves_no_tool_attempt_of_its_calls_while_a_running_one_keeps_its(executor):
    """A tool step records where it starts a call's body (``helix.tool_attempts``; a
    step's parallel calls together), which counts only while the call may run again: the
    step's commit drops them."""
    gate = Gate()
    use_model(executor, calls(call("g1", "wait_here"), call("g2", "wait_here")), calls(call("g3", "wait_here")), text("end"))
    handle = executor.execute(define_agent(unique("commit-attempts"), tools=[gate.tool()]), "go")

    def attempts() -> list[tuple[int, str]]:
        return [(r["step"], r["tool_call_id"]) for r in rows(
            executor, "SELECT step, tool_call_id FROM helix.tool_attempts"
                      " WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %(s)s) ORDER BY step", s=handle.session_id)]

    gate.wait_entered()
    running = sorted(attempts())
    gate.open()
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    assert running == [(1, "g1"), (1, "g2")]
    assert attempts() == []


def commit_as_previous_release(executor: Any, commit: StepCommit) -> dict[str, Any]:
    """``helix.commit_step`` as a worker of the previous release calls it: the payload
    without the statuses Python decides."""
    payload = commit.to_json_payload()
    del payload["status"], payload["status_if_interrupted"]
    with executor.pool.connection() as conn:
        return dict(conn.execute("SELECT helix.commit_step(CAST(%(p)s AS jsonb))", {"p": json.dumps(payload)}).fetchone()[0])


def session_and_run_status(executor: Any, session_id: str) -> tuple[str, str]:
    row = rows(executor, "SELECT s.status, r.status AS run_status FROM helix.sessions s"
                         " JOIN helix.runs r ON r.session_num = s.num AND r.run = s.run_count WHERE s.id = %(s)s", s=session_id)[0]
    return row["status"], row["run_status"]


@pytest.mark.parametrize("previous_release", [False, True])
@pytest.mark.parametrize("ending", ["goes on", "interrupted", "completed"])
def test_a_commit_sets_the_status_python_decided_and_a_previous_releases_commit_the_same(executor, ending, previous_release):
    gate = Gate()
    agent = define_agent(unique("commit-status"), tools=[gate.tool()])
    use_model(executor, calls(call("g1", "wait_here")), text("end"))
    handle = executor.execute(agent, "go")
    gate.wait_entered()  # step 1 runs; this test commits it first, as the run's own commit would
    if ending == "interrupted":
        assert executor.interrupt(handle.session_id)
    commit = again(handle.session_id, run=1, step=1)
    if ending == "completed":
        commit.terminal = Terminal(status="completed", output="early", stop_reason="end_turn")
    if previous_release:
        outcome = commit_as_previous_release(executor, commit)
    else:
        outcome = executor.runtime.commit_step(commit).model_dump()
    expected = {"goes on": ("active", "active"), "interrupted": ("interrupted", "interrupted"),
                "completed": ("completed", "completed")}[ending]
    assert session_and_run_status(executor, handle.session_id) == expected
    assert outcome["interrupted"] == (ending == "interrupted")
    gate.open()
    result = handle.result(timeout=RESULT_TIMEOUT)  # the run's own commit of step 1 is recognized, not repeated
    if ending == "completed":  # the run went on to step 2, which the ended session refuses, in words
        assert result.status == "failed" and "cannot be committed: the session is completed" in (result.error or "")
    final = {"goes on": ("completed", "completed"), "interrupted": expected, "completed": expected}[ending]
    assert session_and_run_status(executor, handle.session_id) == final
