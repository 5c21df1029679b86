"""The step commit is a plain transaction, not a DBOS step (_store/sql/009): calling it again
for a step its run committed already (what a replay does) writes nothing and answers what
the first call answered, interrupted or not; a step that is not the next one is refused,
writing nothing. The SIGKILL between a commit and the next checkpoint is a kill point of
tests/crash/test_crash_recovery.py."""

from __future__ import annotations

from typing import Any

from runtime_testkit import RESULT_TIMEOUT, Gate, call, calls, rows, text, unique, use_model

from helix_dbos import define_agent
from helix_dbos.events import StepFinishEvent
from helix_dbos._store.records import KeyedEvent, StepCommit
from helix_dbos.types import AssistantMessage


def counts(executor: Any, session_id: str) -> dict[str, int]:
    """How many rows the session has in each table a commit writes to."""
    where = {
        "messages": "helix.messages WHERE session_num = (SELECT num FROM helix.sessions WHERE id = :s)",
        "events": "helix.events WHERE session_num = (SELECT num FROM helix.sessions WHERE id = :s)",
        "state_patches": "helix.state_patches WHERE session_num = (SELECT num FROM helix.sessions WHERE id = :s)",
        "usage": "helix.session_usage(:s)",
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
    keys = [r["key"] for r in rows(executor, "SELECT key FROM helix.events WHERE session_num = (SELECT num FROM helix.sessions WHERE id = :s) AND type = 'interrupted'",
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
