"""The one Event union: every event type round-trips through its stored form."""

from __future__ import annotations

import typing

import pytest
from pydantic import ValidationError

from helix_dbos import events
from helix_dbos.events import RUN_END_EVENTS, Event, parse_event

SAMPLES: list[events._Event] = [
    events.RunStartEvent(run=1, kind="execute", input="hi"),
    events.StepStartEvent(step=1),
    events.TextEvent(content="hello"),
    events.ToolCallEvent(tool_call_id="t1", tool_name="search", input={"q": "x"}),
    events.ApprovalRequestEvent(tool_call_id="t2", tool_name="refund", input={"amount": 5}),
    events.ClientToolRequestEvent(tool_call_id="t3", tool_name="pick", input=None),
    events.ToolResultEvent(tool_call_id="t1", tool_name="search", content="{}", is_error=False),
    events.StatePatchEvent(patches=[{"op": "add", "path": "/a", "value": 1}]),
    events.StepFinishEvent(step=1, stop_reason="end_turn", usage={"total_tokens": 3}),
    events.FinishEvent(output={"answer": 42}, stop_reason="end_turn", usage={"total_tokens": 7}),
    events.ErrorEvent(error="boom", stop_reason="error"),
    events.InterruptedEvent(step=2),
    events.AbortedEvent(reason="operator"),
    events.ResumedEvent(run=1, workflow_id="helix:s:run:1"),
    events.ForkedEvent(source_session_id="s", from_step=1),
    events.CustomEvent(name="progress", data={"pct": 50}, tool_call_id="t1"),
    events.SubAgentStartEvent(tool_call_id="t4", session_id="c", agent="child"),
    events.SubAgentEventEvent(session_id="c", event={"seq": 1, "type": "text", "data": {"content": "x"}}),
    events.SubAgentFinishEvent(tool_call_id="t4", session_id="c", status="completed"),
]


def test_every_member_of_the_union_has_a_sample() -> None:
    members = typing.get_args(typing.get_args(Event)[0])
    assert {m.__name__ for m in members} == {type(e).__name__ for e in SAMPLES}


@pytest.mark.parametrize("event", SAMPLES, ids=lambda e: e.type)
def test_stored_form_round_trips(event: events._Event) -> None:
    row = event.to_row()
    assert set(row) == {"type", "data"}
    assert parse_event(row["type"], row["data"]) == event
    assert event.summary()


def test_run_end_events_are_the_ones_that_say_so() -> None:
    assert {e.type for e in SAMPLES if e.ends_run} == RUN_END_EVENTS


def test_an_unknown_type_is_refused() -> None:
    with pytest.raises(ValidationError):
        parse_event("no_such_event", {})


@pytest.mark.parametrize("event", SAMPLES, ids=lambda e: e.type)
def test_a_field_a_later_release_adds_is_read_past(event: events._Event) -> None:
    """A worker of this release reads the stream a newer one writes while a deploy rolls."""
    row = event.to_row()
    assert parse_event(row["type"], {**row["data"], "added_later": {"ms": 1.5}}) == event


def test_an_event_without_a_field_it_needs_is_refused() -> None:
    with pytest.raises(ValidationError):
        parse_event("tool_result", {"tool_call_id": "t1", "tool_name": "search", "added_later": 1})
