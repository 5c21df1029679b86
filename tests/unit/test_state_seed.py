"""Every worked example of state tracking, with its exact patches."""

from __future__ import annotations

from typing import Any

import pytest

from helix_dbos.state import (
    StateError,
    StateTracker,
    apply_rfc6902,
    apply_step_writes,
    merge_step_writes,
    step_writes_to_rfc6902,
)


def test_simple_property_update() -> None:
    tracker = StateTracker({"count": 0, "name": "test"})

    def change(draft: Any) -> None:
        draft.count = 5

    tracker.update(change)

    assert tracker.get_rfc6902_patches() == [{"op": "replace", "path": "/count", "value": 5}]


def test_object_addition_in_delta_mode() -> None:
    tracker = StateTracker({"items": []}, array_delta_mode=True)
    tracker.update(lambda draft: draft.items.append({"id": 1, "name": "item"}))

    assert tracker.get_rfc6902_patches() == [{"op": "add", "path": "/items/-", "value": {"id": 1, "name": "item"}}]


def test_nested_update_patches_the_leaf() -> None:
    tracker = StateTracker({"user": {"profile": {"name": "Alice"}}})

    def change(draft: Any) -> None:
        draft.user.profile.name = "Bob"

    tracker.update(change)

    assert tracker.get_rfc6902_patches() == [{"op": "replace", "path": "/user/profile/name", "value": "Bob"}]
    writes = tracker.get_step_writes()
    assert writes == [{"op": "replace", "path": ["user", "profile", "name"], "value": "Bob"}]
    assert apply_step_writes({"user": {"profile": {"name": "Alice"}}}, writes) == {"user": {"profile": {"name": "Bob"}}}


def test_append_classification_mode_emits_end_of_array_adds() -> None:
    tracker = StateTracker({"notes": []}, array_delta_mode=True)

    def change(draft: Any) -> None:
        draft.notes.append({"content": "Note 1"})
        draft.notes.append({"content": "Note 2"})

    tracker.update(change)

    assert tracker.get_rfc6902_patches() == [
        {"op": "add", "path": "/notes/-", "value": {"content": "Note 1"}},
        {"op": "add", "path": "/notes/-", "value": {"content": "Note 2"}},
    ]


def test_full_replace_mode_splice_replaces_the_whole_array() -> None:
    tracker = StateTracker({"items": [1, 2, 3]})
    tracker.update(lambda draft: draft.items.__delitem__(1))  # items.splice(1, 1)

    assert tracker.get_rfc6902_patches() == [{"op": "replace", "path": "/items", "value": [1, 3]}]


def test_full_replace_mode_is_the_default_also_for_pushes() -> None:
    tracker = StateTracker({"items": [1]})
    tracker.update(lambda draft: draft.items.append(2))

    assert tracker.get_rfc6902_patches() == [{"op": "replace", "path": "/items", "value": [1, 2]}]


def test_tool_context_stream_example() -> None:
    """The seed's state_patch chunk, then the frontend applying it."""
    tracker = StateTracker({"notes": [], "searchCount": 0}, array_delta_mode=True)

    def change(draft: Any) -> None:
        draft.notes.append({"content": "New note"})
        draft.searchCount = 5

    tracker.update(change)
    patches = step_writes_to_rfc6902(tracker.get_step_writes())

    assert patches == [
        {"op": "add", "path": "/notes/-", "value": {"content": "New note"}},
        {"op": "replace", "path": "/searchCount", "value": 5},
    ]
    local_state = {"notes": [], "searchCount": 0}
    assert apply_rfc6902(local_state, patches) == {"notes": [{"content": "New note"}], "searchCount": 5}


def test_updates_within_one_tool_are_sequential() -> None:
    tracker = StateTracker({"count": 0})

    def increment(draft: Any) -> None:
        draft.count += 1

    tracker.update(increment)
    tracker.update(increment)

    assert tracker.get_state().count == 2
    assert tracker.get_rfc6902_patches() == [{"op": "replace", "path": "/count", "value": 2}]


def _tool_writes(base: dict[str, Any], fn: Any) -> Any:
    tracker = StateTracker(base, array_delta_mode=True)
    tracker.update(fn)
    return tracker.get_step_writes()


def test_parallel_replaces_are_last_writer_wins() -> None:
    base = {"count": 0}
    tool_a = _tool_writes(base, lambda draft: draft.__setitem__("count", 1))
    tool_b = _tool_writes(base, lambda draft: draft.__setitem__("count", 2))

    assert apply_step_writes(base, merge_step_writes([tool_a, tool_b])) == {"count": 2}
    assert apply_step_writes(base, merge_step_writes([tool_b, tool_a])) == {"count": 1}


def test_parallel_in_place_appends_compose() -> None:
    base: dict[str, Any] = {"notes": []}
    tool_a = _tool_writes(base, lambda draft: draft.notes.append("a"))
    tool_b = _tool_writes(base, lambda draft: draft.notes.append("b"))

    assert tool_a == [{"op": "append", "path": ["notes"], "values": ["a"]}]
    merged = merge_step_writes([tool_a, tool_b])
    assert step_writes_to_rfc6902(merged) == [
        {"op": "add", "path": "/notes/-", "value": "a"},
        {"op": "add", "path": "/notes/-", "value": "b"},
    ]
    assert apply_step_writes(base, merged) == {"notes": ["a", "b"]}


def test_parallel_whole_array_reassignments_are_last_writer_wins() -> None:
    """``x = [...x, item]`` is a replace, not an append (seed: last-write-wins)."""
    base = {"notes": ["n"]}
    tool_a = _tool_writes(base, lambda draft: draft.__setitem__("notes", [*draft.notes, "a"]))
    tool_b = _tool_writes(base, lambda draft: draft.__setitem__("notes", draft.notes + ["b"]))  # noqa: RUF005

    assert tool_a == [{"op": "replace", "path": ["notes"], "value": ["n", "a"]}]
    assert apply_step_writes(base, merge_step_writes([tool_a, tool_b])) == {"notes": ["n", "b"]}


def test_sub_agent_trackers_are_isolated() -> None:
    parent = StateTracker({"notes": ["note1"]})
    child = StateTracker({"texts": []})
    child.update(lambda draft: draft.texts.append("t"))

    assert parent.get_state() == {"notes": ["note1"]}
    assert parent.get_step_writes() == []


# --- "Testing State Tracking" -------------------------------------------------------


def test_tracks_array_additions() -> None:
    """The seed's test builds the tracker without options yet expects ``/-`` adds, which only
    array delta mode produces (its "Full Replace Mode" section says the default replaces
    the array); it runs here in delta mode, the mode every runtime uses."""
    tracker = StateTracker({"items": []}, array_delta_mode=True)
    tracker.update(lambda draft: draft.items.append("a"))
    tracker.update(lambda draft: draft.items.append("b"))

    assert tracker.get_state().items == ["a", "b"]
    assert tracker.get_rfc6902_patches() == [
        {"op": "add", "path": "/items/-", "value": "a"},
        {"op": "add", "path": "/items/-", "value": "b"},
    ]


def test_tracks_array_additions_in_default_mode_as_one_replace() -> None:
    tracker = StateTracker({"items": []})
    tracker.update(lambda draft: draft.items.append("a"))
    tracker.update(lambda draft: draft.items.append("b"))

    assert tracker.get_rfc6902_patches() == [{"op": "replace", "path": "/items", "value": ["a", "b"]}]


def test_resets_tracking() -> None:
    tracker = StateTracker({"count": 0})
    tracker.update(lambda draft: draft.__setitem__("count", 1))
    tracker.reset_tracking()
    tracker.update(lambda draft: draft.__setitem__("count", 2))

    assert tracker.get_rfc6902_patches() == [{"op": "replace", "path": "/count", "value": 2}]


# --- "Limitations" -----------------------------------------------------------------


def test_functions_cannot_be_stored() -> None:
    tracker = StateTracker({})

    def change(draft: Any) -> None:
        draft.callback = lambda: print("hello")

    with pytest.raises(StateError, match="/callback"):
        tracker.update(change)


def test_circular_references_cannot_be_stored() -> None:
    obj: dict[str, Any] = {"self": None}
    obj["self"] = obj
    tracker = StateTracker({})

    with pytest.raises(StateError, match=r"circular reference.*at /circular/self"):
        tracker.update(lambda draft: draft.__setitem__("circular", obj))


def test_modifying_one_item_of_a_large_array_replaces_the_array() -> None:
    items = [{"id": number} for number in range(100)]
    tracker = StateTracker({"largeArray": items}, array_delta_mode=True)

    def change(draft: Any) -> None:
        draft.largeArray[50].modified = True

    tracker.update(change)

    (patch,) = tracker.get_rfc6902_patches()
    assert patch["op"] == "replace" and patch["path"] == "/largeArray"
    assert len(patch["value"]) == 100 and patch["value"][50] == {"id": 50, "modified": True}


def test_deep_nesting_gives_long_paths() -> None:
    state = {"level1": {"level2": {"level3": {"level4": {"level5": {"value": 0}}}}}}
    tracker = StateTracker(state)

    def change(draft: Any) -> None:
        draft.level1.level2.level3.level4.level5.value = 1

    tracker.update(change)

    assert tracker.get_rfc6902_patches() == [
        {"op": "replace", "path": "/level1/level2/level3/level4/level5/value", "value": 1}
    ]
