"""How a follower of a session's stream takes one read (``take_page``), the rule the sync
follower (``follow_events``) and the async one (``follow_events_async``) share: stop after
a run's end when asked to, read again at once after a full page, else wait."""

from __future__ import annotations

from datetime import datetime, timezone

from helix_dbos._client.streams import PAGE, Page, take_page
from helix_dbos._store.records import EventRecord


def events(*types: str, first: int = 1) -> list[EventRecord]:
    at = datetime(2026, 1, 1, tzinfo=timezone.utc)
    return [EventRecord(session_id="s1", seq=first + i, run=1, step=1, type=t, data={}, created_at=at)
            for i, t in enumerate(types)]


def test_a_run_end_cuts_the_read_when_the_follower_stops_there() -> None:
    batch = events("tool_call", "finish", "run_start", first=5)

    stopping = take_page(batch, 4, until_run_end=True)
    going_on = take_page(batch, 4, until_run_end=False)

    assert stopping == Page(batch[:2], 6, ended=True, more=False)
    assert going_on == Page(batch, 7, ended=False, more=False)


def test_a_full_read_is_read_again_at_once_and_a_short_one_waits() -> None:
    full = events(*["text"] * PAGE)

    assert take_page(full, 0, until_run_end=True) == Page(full, PAGE, ended=False, more=True)
    assert take_page(full[:3], 0, until_run_end=True).more is False
    assert take_page([], 9, until_run_end=True) == Page([], 9, ended=False, more=False)
