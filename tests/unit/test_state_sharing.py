"""Structural sharing: small updates copy only what they touch, and shared arrays stay correct.

The first tests look at the tracker's internal nodes on purpose: "does not copy the
list" is not observable from outside except by timing (see scripts/bench_state.py).
"""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from pydantic import BaseModel, model_validator

from helix_dbos.state import StateTracker, StateValidationError


def _state_node(tracker: StateTracker) -> dict[str, Any]:
    return tracker.get_state()._state_node()


def test_a_small_update_shares_everything_it_does_not_touch() -> None:
    tracker = StateTracker({"items": list(range(1000)), "big": {"rows": [[1]] * 1000}, "count": 0})
    before = _state_node(tracker)

    tracker.update(lambda draft: draft.__setitem__("count", 1))
    after = _state_node(tracker)

    assert after is not before
    assert after["items"] is before["items"] and after["big"] is before["big"]


@pytest.mark.parametrize("delta", [True, False])
def test_appending_does_not_copy_the_list(delta: bool) -> None:
    tracker = StateTracker({"items": list(range(1000)), "count": 0}, array_delta_mode=delta)
    original = _state_node(tracker)["items"]

    for number in range(3):
        tracker.update(lambda draft, number=number: (draft.items.append(number), draft.__setitem__("count", number)))

    items = _state_node(tracker)["items"]
    assert items.head is original  # the 1000 items are shared, not copied
    assert tracker.get_state().items[-3:] == [0, 1, 2] and len(tracker.get_state().items) == 1003


def test_a_nested_write_copies_only_its_path() -> None:
    tracker = StateTracker({"user": {"profile": {"name": "A"}, "history": list(range(100))}, "other": {"x": 1}})
    before = _state_node(tracker)

    tracker.update(lambda draft: draft.user.profile.__setitem__("name", "B"))
    after = _state_node(tracker)

    assert after["other"] is before["other"]
    assert after["user"]["history"] is before["user"]["history"]
    assert after["user"]["profile"] is not before["user"]["profile"]


def test_get_state_does_not_copy() -> None:
    tracker = StateTracker({"items": list(range(1000))})

    assert tracker.get_state()._state_node() is tracker.get_state()._state_node()


def test_a_tracker_built_from_a_view_shares_its_state() -> None:
    first = StateTracker({"items": list(range(100))})
    second = StateTracker(first.get_state())

    assert _state_node(second) is _state_node(first)


# --- arrays that share their storage stay independent --------------------------------


def test_trackers_sharing_a_grown_array_append_independently() -> None:
    first = StateTracker({"xs": [0]}, array_delta_mode=True)
    first.update(lambda draft: draft.xs.append(1))
    second = StateTracker(first.get_state(), array_delta_mode=True)

    first.update(lambda draft: draft.xs.append("first"))
    second.update(lambda draft: draft.xs.append("second"))

    assert first.get_state().xs == [0, 1, "first"]
    assert second.get_state().xs == [0, 1, "second"]
    assert second.get_step_writes() == [{"op": "append", "path": ["xs"], "values": ["second"]}]


def test_a_tracker_never_grows_another_trackers_array_storage_in_place() -> None:
    """Trackers sharing state may run in different threads: only the tracker that grew an
    array's storage may grow it in place again, so two never race on one list."""
    first = StateTracker({"xs": [0]}, array_delta_mode=True)
    first.update(lambda draft: draft.xs.append(1))
    second = StateTracker(first.get_state(), array_delta_mode=True)

    second.update(lambda draft: draft.xs.append(2))

    assert _state_node(second)["xs"].tail is not _state_node(first)["xs"].tail
    assert first.get_state().xs == [0, 1] and second.get_state().xs == [0, 1, 2]


def test_two_members_holding_the_same_array_grow_independently() -> None:
    tracker = StateTracker({"a": []}, array_delta_mode=True)

    def change(draft: Any) -> None:
        draft.a.append(0)
        draft.b = draft.a
        draft.a.append("a")
        draft.b.append("b")

    tracker.update(change)
    tracker.update(lambda draft: (draft.a.append("a2"), draft.b.append("b2")))

    assert tracker.get_state() == {"a": [0, "a", "a2"], "b": [0, "b", "b2"]}


def test_an_update_rejected_after_appending_leaves_no_trace() -> None:
    class Schema(BaseModel):
        xs: list[int]

    tracker = StateTracker({"xs": [1]}, array_delta_mode=True, schema=Schema)
    tracker.update(lambda draft: draft.xs.append(2))
    tracker.reset_tracking()
    with pytest.raises(StateValidationError):
        tracker.update(lambda draft: draft.xs.append("not an int"))

    tracker.update(lambda draft: draft.xs.append(3))

    assert tracker.get_state().xs == [1, 2, 3]
    assert tracker.get_step_writes() == [{"op": "append", "path": ["xs"], "values": [3]}]


def test_negative_zero_is_a_change() -> None:
    tracker = StateTracker({"x": 0.0})
    tracker.update(lambda draft: draft.__setitem__("x", -0.0))

    assert [str(write["value"]) for write in tracker.get_step_writes()] == ["-0.0"]


class Counted(BaseModel):
    """A state schema that counts how often a whole state is checked against it."""

    notes: list[str] = []
    checked: ClassVar[list[int]] = []

    @model_validator(mode="after")
    def count(self) -> Counted:
        Counted.checked.append(len(self.notes))
        return self


def test_trackers_started_from_one_snapshot_check_it_once() -> None:
    """A step's parallel tools start from one snapshot of the state: it is checked
    against the schema once, not once per tool; each tool's updates are checked."""
    Counted.checked.clear()
    start = StateTracker({"notes": ["a"]}).get_state()

    tools = [StateTracker(start, array_delta_mode=True, schema=Counted) for _ in range(3)]
    assert Counted.checked == [1]

    tools[0].update(lambda draft: draft.notes.append("b"))
    assert Counted.checked == [1, 2]
    again = StateTracker(tools[0].get_state(), schema=Counted)  # a tracker's own state matches its schema
    assert again.get_state() == {"notes": ["a", "b"]} and Counted.checked == [1, 2]


def test_a_snapshot_that_does_not_match_is_refused_by_every_tracker_started_from_it() -> None:
    start = StateTracker({"notes": "not a list"}).get_state()

    for _ in range(2):
        with pytest.raises(StateValidationError, match="state does not match Counted"):
            StateTracker(start, schema=Counted)
