"""Step writes: applying them, their RFC 6902 form, and merging them in tool-call order."""

from __future__ import annotations

import json
import pickle
from typing import Any

import pytest

from helix_dbos.state import (
    StateError,
    StateTracker,
    StepWrites,
    apply_rfc6902,
    apply_step_writes,
    merge_step_writes,
    step_writes_to_rfc6902,
)


def _writes(base: dict[str, Any], fn: Any) -> StepWrites:
    tracker = StateTracker(base, array_delta_mode=True)
    tracker.update(fn)
    return tracker.get_step_writes()


def test_writes_are_plain_json_data() -> None:
    writes = _writes({"notes": [], "user": {}}, lambda d: (d.notes.append({"a": [1]}), d.user.update(x=1.5)))

    assert json.loads(json.dumps(writes)) == writes
    assert pickle.loads(pickle.dumps(writes)) == writes
    assert {type(write) for write in writes} == {dict}


def test_writes_do_not_alias_the_tracker_state() -> None:
    tracker = StateTracker({"user": {"tags": ["a"]}}, array_delta_mode=False)
    tracker.update(lambda d: d.user.tags.append("b"))
    tracker.get_step_writes()[0]["value"].append("mutated")

    assert tracker.get_state() == {"user": {"tags": ["a", "b"]}}


def test_apply_step_writes_does_not_mutate_its_inputs() -> None:
    state = {"notes": ["a"], "user": {"profile": {"name": "A"}, "other": {"x": 1}}}
    writes: StepWrites = [
        {"op": "append", "path": ["notes"], "values": [{"n": 1}]},
        {"op": "replace", "path": ["user", "profile", "name"], "value": "B"},
    ]
    snapshot = json.dumps([state, writes])

    result = apply_step_writes(state, writes)
    result["notes"][1]["n"] = 2

    assert json.dumps([state, writes]) == snapshot
    assert result["user"]["other"] is state["user"]["other"]  # untouched subtrees are shared


def test_apply_step_writes_accepts_a_state_view() -> None:
    view = StateTracker({"a": {"b": 1}}).get_state()

    assert apply_step_writes(view, [{"op": "replace", "path": ["a", "b"], "value": 2}]) == {"a": {"b": 2}}


@pytest.mark.parametrize(
    ("writes", "message"),
    [
        ([{"op": "delete", "path": ["missing"]}], "cannot delete a missing member at /missing"),
        ([{"op": "append", "path": ["n"], "values": [1]}], "non-array at /n"),
        ([{"op": "replace", "path": ["n", "x"], "value": 1}], "non-object at /n"),
        ([{"op": "replace", "path": ["no", "x"], "value": 1}], "missing member or a non-object at /no"),
        ([{"op": "replace", "path": [], "value": 1}], "non-empty path"),
        ([{"op": "bogus", "path": ["n"]}], "unknown step write op 'bogus'"),
    ],
)
def test_bad_writes_raise_state_error(writes: Any, message: str) -> None:
    with pytest.raises(StateError, match=message):
        apply_step_writes({"n": 0}, writes)


def test_rfc6902_of_each_op() -> None:
    writes: StepWrites = [
        {"op": "append", "path": ["a/b", "c~d"], "values": [1, 2]},
        {"op": "replace", "path": ["x"], "value": None},
        {"op": "replace", "path": ["y"], "value": [], "created": True},
        {"op": "delete", "path": [""]},
    ]

    assert step_writes_to_rfc6902(writes) == [
        {"op": "add", "path": "/a~1b/c~0d/-", "value": 1},
        {"op": "add", "path": "/a~1b/c~0d/-", "value": 2},
        {"op": "replace", "path": "/x", "value": None},
        {"op": "add", "path": "/y", "value": []},
        {"op": "remove", "path": "/"},
    ]
    with pytest.raises(StateError, match="unknown step write op"):
        step_writes_to_rfc6902([{"op": "move", "path": ["x"]}])  # type: ignore[list-item]


def test_apply_rfc6902_does_not_mutate_and_wraps_errors() -> None:
    state = {"xs": []}
    patches = [{"op": "add", "path": "/xs/-", "value": {"k": 1}}]

    result = apply_rfc6902(state, patches)
    result["xs"][0]["k"] = 2

    assert state == {"xs": []} and patches[0]["value"] == {"k": 1}
    with pytest.raises(StateError, match="cannot apply JSON patch"):
        apply_rfc6902(state, [{"op": "replace", "path": "/missing", "value": 1}])


# --- merging -------------------------------------------------------------------------


def test_merge_keeps_appends_of_every_tool_in_call_order() -> None:
    base: dict[str, Any] = {"notes": ["n"], "log": []}
    tools = [
        _writes(base, lambda d: d.notes.append("a")),
        _writes(base, lambda d: (d.log.append("b"), d.notes.extend(["c", "d"]))),
        _writes(base, lambda d: d.notes.append("e")),
    ]

    merged = merge_step_writes(tools)

    assert merged == [
        {"op": "append", "path": ["notes"], "values": ["a", "c", "d", "e"]},
        {"op": "append", "path": ["log"], "values": ["b"]},
    ]


def test_merge_appends_after_a_replace_extend_the_replacement() -> None:
    base = {"notes": ["n"]}
    replace = _writes(base, lambda d: d.__setitem__("notes", ["fresh"]))
    append = _writes(base, lambda d: d.notes.append("a"))

    assert apply_step_writes(base, merge_step_writes([replace, append])) == {"notes": ["fresh", "a"]}
    assert apply_step_writes(base, merge_step_writes([append, replace])) == {"notes": ["fresh"]}


def test_merge_delete_then_write_and_write_then_delete() -> None:
    base = {"x": 1, "user": {"name": "A", "age": 1}, "notes": []}
    delete_x = _writes(base, lambda d: d.__delitem__("x"))
    set_x = _writes(base, lambda d: d.__setitem__("x", 2))
    delete_user = _writes(base, lambda d: d.__delitem__("user"))
    rename = _writes(base, lambda d: d.user.__setitem__("name", "B"))
    delete_notes = _writes(base, lambda d: d.__delitem__("notes"))
    append_note = _writes(base, lambda d: d.notes.append("a"))

    assert merge_step_writes([delete_x, set_x]) == set_x  # the later write wins
    assert merge_step_writes([set_x, delete_x]) == delete_x
    assert merge_step_writes([delete_user, rename]) == delete_user  # no writing into a deleted object
    assert merge_step_writes([rename, delete_user]) == delete_user
    assert merge_step_writes([delete_notes, append_note]) == delete_notes


def test_merge_nested_writes_of_different_members_both_survive() -> None:
    base = {"user": {"name": "A", "age": 1}}
    rename = _writes(base, lambda d: d.user.__setitem__("name", "B"))
    age = _writes(base, lambda d: d.user.__setitem__("age", 2))

    assert apply_step_writes(base, merge_step_writes([rename, age])) == {"user": {"name": "B", "age": 2}}


def test_merge_folds_a_later_nested_write_into_an_earlier_replace() -> None:
    base = {"user": {"name": "A", "age": 1}}
    replace_user = _writes(base, lambda d: d.__setitem__("user", {"name": "R", "role": "x"}))
    set_age = _writes(base, lambda d: d.user.__setitem__("age", 2))
    set_name = _writes(base, lambda d: d.user.__setitem__("name", "N"))

    merged = merge_step_writes([replace_user, set_age, set_name])

    assert merged == [{"op": "replace", "path": ["user"], "value": {"name": "N", "role": "x", "age": 2}}]


def test_merge_later_replace_supersedes_earlier_nested_writes() -> None:
    base = {"user": {"name": "A", "age": 1}}
    rename = _writes(base, lambda d: d.user.__setitem__("name", "B"))
    replace_user = _writes(base, lambda d: d.__setitem__("user", {"fresh": True}))

    assert merge_step_writes([rename, replace_user]) == replace_user


def test_merge_of_sequential_writes_keeps_rfc_ops_valid_for_the_base() -> None:
    """A member created by one write and replaced by a later one is still an ``add`` on the base."""
    base: dict[str, Any] = {"keep": 1}
    tracker = StateTracker(base, array_delta_mode=True)
    tracker.update(lambda d: d.__setitem__("x", 1))
    first = tracker.get_step_writes()
    tracker.reset_tracking()
    tracker.update(lambda d: d.__setitem__("x", 2))
    second = tracker.get_step_writes()
    tracker.reset_tracking()
    tracker.update(lambda d: d.__setitem__("y", 1))
    tracker.reset_tracking()
    tracker.update(lambda d: d.__delitem__("y"))

    merged = merge_step_writes([first, second])

    assert second == [{"op": "replace", "path": ["x"], "value": 2}]
    assert step_writes_to_rfc6902(merged) == [{"op": "add", "path": "/x", "value": 2}]
    assert apply_rfc6902(base, step_writes_to_rfc6902(merged)) == {"keep": 1, "x": 2}


def test_merge_of_create_then_delete_is_nothing() -> None:
    created: StepWrites = [{"op": "replace", "path": ["y"], "value": 1, "created": True}]
    deleted: StepWrites = [{"op": "delete", "path": ["y"]}]

    assert merge_step_writes([created, deleted]) == []


def test_merge_copies_values() -> None:
    first: StepWrites = [{"op": "append", "path": ["xs"], "values": [{"k": 1}]}]
    merged = merge_step_writes([first, [{"op": "append", "path": ["xs"], "values": [2]}]])
    merged[0]["values"][0]["k"] = 9  # type: ignore[typeddict-item]

    assert first == [{"op": "append", "path": ["xs"], "values": [{"k": 1}]}]


def test_merge_refuses_malformed_writes() -> None:
    with pytest.raises(StateError, match="not a step write"):
        merge_step_writes([[{"op": "move", "path": ["x"]}]])  # type: ignore[list-item]
