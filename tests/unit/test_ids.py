"""New session ids (helix_dbos/_ids.py): version-7 UUIDs whose first 48 bits are the time
in milliseconds, so a later session's id sorts after an earlier one's."""

from __future__ import annotations

import doctest
import time
import uuid

from helix_dbos import _ids as ids
from helix_dbos._ids import new_session_id


def test_the_docstring_example_holds() -> None:
    results = doctest.testmod(ids)
    assert results.attempted > 0 and results.failed == 0


def test_a_new_id_is_a_version_7_uuid_in_its_usual_form() -> None:
    sid = new_session_id()
    parsed = uuid.UUID(sid)
    assert str(parsed) == sid
    assert (parsed.version, parsed.variant) == (7, uuid.RFC_4122)


def test_its_first_48_bits_are_the_time_in_milliseconds() -> None:
    before = time.time_ns() // 1_000_000
    sid = new_session_id()
    after = time.time_ns() // 1_000_000
    assert before <= uuid.UUID(sid).int >> 80 <= after


def test_a_later_id_sorts_after_an_earlier_one() -> None:
    first = new_session_id()
    time.sleep(0.002)
    assert new_session_id() > first


def test_ids_made_in_the_same_millisecond_still_differ() -> None:
    assert len({new_session_id() for _ in range(10_000)}) == 10_000
