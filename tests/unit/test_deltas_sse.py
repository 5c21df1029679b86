"""Token delta records (split to fit a NOTIFY) and the SSE encoder: pure, no database."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from helix_dbos import InvalidLastEventIdError
from helix_dbos._deltas import NOTIFY_PAYLOAD_LIMIT, DeltaRecord, split_to_fit
from helix_dbos.sse import KEEPALIVE, encode, resume_from
from helix_dbos._store.records import EventRecord


def record(text: str, **fields: object) -> DeltaRecord:
    base: dict[str, object] = {"session_id": "s1", "run": 1, "step": 2, "attempt": 1_700_000_000_000_000, "index": 0, "kind": "text"}
    return DeltaRecord.model_validate({**base, "text": text, **fields})


def test_a_long_delta_is_split_into_payloads_that_fit_and_rejoin_in_order() -> None:
    text = "ü€𝄞\u0000\"\\\n" * 3000  # multi-byte, NUL, quotes: every payload still fits
    parts = split_to_fit(record(text))

    assert len(parts) > 1
    assert all(len(p.to_payload().encode()) <= NOTIFY_PAYLOAD_LIMIT for p in parts)
    assert "".join(p.text for p in parts) == text
    assert all(p.to_payload().isascii() for p in parts)


def test_a_short_delta_is_one_payload_and_round_trips() -> None:
    delta = record("hi", kind="tool_call", tool_call_id="c1", tool_name="search", tool_index=0)

    assert split_to_fit(delta) == [delta]
    assert DeltaRecord.from_payload(delta.to_payload()) == delta


def test_a_delta_whose_envelope_alone_is_too_big_is_dropped() -> None:
    assert split_to_fit(record("abc", tool_call_id="x" * 9000)) == []


def event(seq: int, content: str) -> EventRecord:
    return EventRecord(session_id="s1", seq=seq, run=1, step=2, type="text", data={"content": content},
                       created_at=datetime(2026, 1, 1, tzinfo=timezone.utc))


def parse_frame(frame: str) -> dict[str, str]:
    assert frame.endswith("\n\n") and "\n\n" not in frame[:-2]
    return dict(line.split(": ", 1) for line in frame[:-2].split("\n"))


def test_a_durable_event_is_a_frame_with_its_seq_as_id() -> None:
    frame = parse_frame(encode(event(41, "two\nlines\r\n")))

    assert frame["id"] == "41" and frame["event"] == "text"
    data = json.loads(frame["data"])
    assert data["seq"] == 41 and data["data"] == {"content": "two\nlines\r\n"}


def test_a_delta_is_a_frame_without_an_id() -> None:
    frame = parse_frame(encode(record("Hel\nlo")))

    assert set(frame) == {"event", "data"} and frame["event"] == "delta"
    assert DeltaRecord.from_payload(frame["data"]).text == "Hel\nlo"


def test_resuming_continues_after_the_last_event_id() -> None:
    assert resume_from(None) == 0
    assert resume_from("") == 0
    assert resume_from("41") == 42
    assert resume_from(parse_frame(encode(event(7, "x")))["id"]) == 8
    assert KEEPALIVE.startswith(":") and KEEPALIVE.endswith("\n\n")


@pytest.mark.parametrize("bad", ["abc", "-1", "4.2", "٣", "1e3"])
def test_a_last_event_id_that_is_no_seq_is_refused(bad: str) -> None:
    with pytest.raises(InvalidLastEventIdError, match="Last-Event-ID"):
        resume_from(bad)
