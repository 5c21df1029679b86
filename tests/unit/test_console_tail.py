"""The console's live tail turns each event into a log line (as ``helix-dbos tail`` words it),
and its page mark changes with what the session page shows."""

from __future__ import annotations

import doctest
from datetime import datetime, timezone

from helix_dbos.server.console import tail
from helix_dbos._store.records import EventRecord, RunRecord, SessionRecord
from helix_dbos.types import SessionStatus

AT = datetime(2026, 1, 2, 9, 41, 7, tzinfo=timezone.utc)


def record(event_type: str, data: object) -> EventRecord:
    return EventRecord(session_id="s1", seq=4, run=2, step=3, type=event_type, data=data, created_at=AT)


def test_the_docstring_examples_hold() -> None:
    results = doctest.testmod(tail)
    assert results.attempted > 0 and results.failed == 0


def test_a_tool_result_is_a_line_that_names_the_call_it_answers() -> None:
    data = {"tool_call_id": "c1", "tool_name": "lookup", "content": '{"city":"Paris"}'}

    line = tail.line_of(record("tool_result", data))

    assert line == {"seq": 4, "run": 2, "step": 3, "at": "09:41:07", "type": "tool_result",
                    "text": 'lookup [c1]: {"city":"Paris"}'}


def test_an_event_of_a_type_this_release_does_not_know_shows_its_data() -> None:
    line = tail.line_of(record("added_later", {"note": "<b>x</b>"}))

    assert line["text"] == '{"note":"<b>x</b>"}'


def test_the_page_mark_changes_with_each_thing_the_session_page_shows() -> None:
    session = SessionRecord(id="s1", agent_name="a", status="awaiting_approval", step_count=1, run_count=1,
                            message_count=2, event_seq=7, root_session_id="s1", created_at=AT, updated_at=AT)
    run = RunRecord(session_id="s1", run=1, workflow_id="w1", kind="execute", status="active", start_step=1,
                    start_seq=1, started_at=AT, workflow_status="PENDING")
    base = tail.page_mark(session, [run], [], 0)

    changed = [
        tail.page_mark(session.model_copy(update={"status": SessionStatus.COMPLETED}), [run], [], 0),
        tail.page_mark(session.model_copy(update={"event_seq": 8}), [run], [], 0),
        tail.page_mark(session.model_copy(update={"step_count": 2}), [run], [], 0),
        tail.page_mark(session, [run.model_copy(update={"workflow_status": "SUCCESS"})], [], 0),
        tail.page_mark(session, [run.model_copy(update={"executor_id": "other"})], [], 0),
        tail.page_mark(session, [run], [], 1),
    ]

    assert tail.page_mark(session, [run], [], 0) == base
    assert base not in changed and len(set(changed)) == len(changed)
