"""What the console says about an answered call its run has not settled yet: received
(the step's waiter still holds it), taken (the run's continuation has it, queued or
settling), or waiting for the step's other calls."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from helix_dbos.server.console.received import call_notes, status_note
from helix_dbos._store.records import AnswerRecord, PendingToolCall, RunRecord

AT = datetime(2026, 1, 2, 9, 41, 7, tzinfo=timezone.utc)
WAITER = "helix:s1:run:1:wait:2"


def pending(call_id: str, session_id: str = "s1", step: int = 2) -> PendingToolCall:
    return PendingToolCall(
        session_id=session_id, tool_call_id=call_id, root_session_id="s1", workflow_id=WAITER, run=1, step=step,
        tool_name="lookup", kind="client", status="pending", requested_at=AT,
    )


def answered(*calls: PendingToolCall) -> dict[tuple[str, str], AnswerRecord]:
    return {
        (c.session_id, c.tool_call_id): AnswerRecord(
            session_id=c.session_id, tool_call_id=c.tool_call_id, kind="client", answer={"result": 1}, answered_at=AT
        )
        for c in calls
    }


def run(workflow_id: str = WAITER, workflow_status: str = "PENDING") -> RunRecord:
    return RunRecord(
        session_id="s1", run=1, workflow_id=workflow_id, kind="execute", status="awaiting_client_tool", start_step=0,
        start_seq=1, started_at=AT, workflow_status=workflow_status,
    )


@pytest.mark.parametrize(
    "runs, note, beside_status",
    [
        ([run()], "Answer received · waiting for the run to take it.",
         "answer received · waiting for the run to take it"),
        ([run("helix:s1:run:1:step:2", "ENQUEUED")], "Answer taken · the run waits on its queue for a worker.",
         "answer taken · the run waits on its queue for a worker"),
        ([run("helix:s1:run:1:step:2", "PENDING")], "Answer taken · the run is settling step 2.",
         "answer taken · the run is settling step 2"),
    ],
    ids=["received", "queued", "settling"],
)
def test_an_answered_call_is_received_until_the_waiter_hands_the_run_on(runs, note, beside_status) -> None:
    c1 = pending("c1")

    assert call_notes("s1", [c1], answered(c1), runs) == {("s1", "c1"): note}
    assert status_note("s1", [c1], answered(c1), runs) == beside_status


def test_an_answer_waits_for_the_other_calls_of_its_step_and_the_status_is_not_stale() -> None:
    calls = [pending("c1"), pending("c2"), pending("c3"), pending("c4", step=3)]

    one_open = call_notes("s1", calls[:2], answered(calls[0]), [run()])
    two_open = call_notes("s1", calls, answered(calls[0], calls[3]), [run()])

    assert one_open == {("s1", "c1"): "Answer received · the run takes it once the other call of step 2 is answered."}
    assert two_open[("s1", "c1")] == "Answer received · the run takes it once the other 2 calls of step 2 are answered."
    assert status_note("s1", calls[:2], answered(calls[0]), [run()]) is None


def test_a_sub_agent_s_call_is_received_and_the_parent_s_status_note_counts_its_own_calls() -> None:
    child, own_a, own_b = pending("k1", session_id="s1/child"), pending("c1"), pending("c2")
    runs = [run("helix:s1:run:1:step:2")]

    notes = call_notes("s1", [child], answered(child), runs)

    assert notes == {("s1/child", "k1"): "Answer received · waiting for the run to take it."}
    assert status_note("s1", [child], answered(child), runs) is None  # the parent waits for no call of its own
    assert status_note("s1", [own_a, own_b, child], answered(own_a, own_b), runs) == (
        "answers taken · the run is settling step 2"
    )
