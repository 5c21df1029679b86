"""The console's live tail turns each event into a log line (as ``helix-dbos tail`` words it)."""

from __future__ import annotations

import doctest
from datetime import datetime, timezone

from helix_dbos.server.console import tail
from helix_dbos._store.records import EventRecord

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
                    "text": 'lookup [c1]: {"city":"Paris"}', "taken": "c1"}


def test_an_event_of_a_type_this_release_does_not_know_shows_its_data() -> None:
    line = tail.line_of(record("added_later", {"note": "<b>x</b>"}))

    assert line["text"] == '{"note":"<b>x</b>"}' and line["taken"] is None
