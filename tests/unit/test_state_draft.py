"""Drafts behave like the dicts and lists they stand for, and their changes are classified right."""

from __future__ import annotations

import copy
import pickle
from collections.abc import MutableMapping, MutableSequence
from typing import Any

import pytest
from pydantic import BaseModel

from helix_dbos.state import DictDraft, ListDraft, StateError, StateTracker


def _run(state: dict[str, Any], fn: Any, delta: bool = True) -> StateTracker:
    tracker = StateTracker(state, array_delta_mode=delta)
    tracker.update(fn)
    return tracker


# --- dict drafts ----------------------------------------------------------------------


def test_dict_draft_reads_by_attribute_and_item() -> None:
    seen: dict[str, Any] = {}

    def read(draft: Any) -> None:
        seen["attr"] = draft.user.name
        seen["item"] = draft["user"]["name"]
        seen["types"] = (type(draft), type(draft.user), type(draft.tags))

    _run({"user": {"name": "Ann"}, "tags": []}, read)

    assert seen == {"attr": "Ann", "item": "Ann", "types": (DictDraft, DictDraft, ListDraft)}


def test_state_keys_shadow_mapping_methods_and_methods_work_otherwise() -> None:
    def change(draft: Any) -> None:
        draft.items.append(1)  # the "items" key, not dict.items
        draft.user.update(name="Bo")  # no "update" key under user: the mapping method
        assert sorted(draft.user.keys()) == ["age", "name"]
        assert dict(draft.user.items()) == {"name": "Bo", "age": 3}
        assert draft.user.get("missing", 7) == 7

    tracker = _run({"items": [], "user": {"name": "Al", "age": 3}}, change)

    assert tracker.get_state() == {"items": [1], "user": {"name": "Bo", "age": 3}}


def test_missing_attribute_raises_attribute_error() -> None:
    def read(draft: Any) -> None:
        with pytest.raises(AttributeError, match="no key 'nope'"):
            _ = draft.nope
        with pytest.raises(AttributeError):
            del draft.nope
        with pytest.raises(KeyError):
            draft["nope"]

    _run({"a": 1}, read)


def test_dict_draft_is_a_mutable_mapping() -> None:
    def check(draft: Any) -> None:
        assert isinstance(draft, MutableMapping)
        assert isinstance(draft.xs, MutableSequence)
        assert "a" in draft and len(draft) == 2 and list(draft) == ["a", "xs"]

    _run({"a": 1, "xs": []}, check)


def test_dict_mutations() -> None:
    def change(draft: Any) -> None:
        assert draft.popitem() == ("last", 9)
        assert draft.pop("gone") == {"x": [1]}
        assert draft.pop("absent", "dflt") == "dflt"
        draft.setdefault("tags", []).append("t")
        assert draft.setdefault("kept", 0) == 1
        del draft["drop"]
        del draft.drop2
        draft.new = {"n": 1}

    tracker = _run({"gone": {"x": [1]}, "kept": 1, "drop": 0, "drop2": 0, "last": 9}, change)

    assert tracker.get_state() == {"kept": 1, "tags": ["t"], "new": {"n": 1}}
    assert tracker.get_step_writes() == [
        {"op": "replace", "path": ["tags"], "value": ["t"], "created": True},
        {"op": "replace", "path": ["new"], "value": {"n": 1}, "created": True},
        {"op": "delete", "path": ["gone"]},
        {"op": "delete", "path": ["drop"]},
        {"op": "delete", "path": ["drop2"]},
        {"op": "delete", "path": ["last"]},
    ]


def test_dict_clear_then_refill() -> None:
    def change(draft: Any) -> None:
        draft.user.clear()
        draft.user.name = "new"

    tracker = _run({"user": {"name": "old", "age": 1}}, change)

    assert tracker.get_step_writes() == [{"op": "replace", "path": ["user"], "value": {"name": "new"}}]


def test_several_changes_under_one_key_replace_their_common_object() -> None:
    def change(draft: Any) -> None:
        draft.user.profile.name = "Bob"
        draft.user.profile.age = 4

    tracker = _run({"user": {"profile": {"name": "Al", "age": 3}, "id": 1}}, change)

    assert tracker.get_step_writes() == [
        {"op": "replace", "path": ["user", "profile"], "value": {"name": "Bob", "age": 4}}
    ]


def test_new_nested_member_is_a_created_replace_and_an_rfc_add() -> None:
    def change(draft: Any) -> None:
        draft.user.profile.email = "a@b"

    tracker = _run({"user": {"profile": {}}}, change)

    assert tracker.get_rfc6902_patches() == [{"op": "add", "path": "/user/profile/email", "value": "a@b"}]


def test_assigning_an_equal_value_writes_nothing() -> None:
    def change(draft: Any) -> None:
        draft.count = 1
        draft.user = {"name": "A"}
        draft.items = [1, 2]

    tracker = _run({"count": 1, "user": {"name": "A"}, "items": [1, 2]}, change)

    assert tracker.get_step_writes() == []


@pytest.mark.parametrize("new", [True, 1.0, "1"])
def test_a_change_of_json_type_is_a_write(new: Any) -> None:
    tracker = _run({"v": 1}, lambda draft: draft.__setitem__("v", new))

    assert tracker.get_step_writes() == [{"op": "replace", "path": ["v"], "value": new}]
    assert type(tracker.get_step_writes()[0]["value"]) is type(new)


def test_change_then_revert_writes_nothing() -> None:
    def change(draft: Any) -> None:
        draft.count = 2
        draft.count = 1
        draft.notes.append("x")
        draft.notes.pop()

    tracker = _run({"count": 1, "notes": ["a"]}, change)

    assert tracker.get_step_writes() == []


def test_pydantic_models_assigned_into_the_draft_are_dumped() -> None:
    class Note(BaseModel):
        content: str
        tags: tuple[str, ...] = ()

    tracker = _run({"notes": []}, lambda draft: draft.notes.append(Note(content="c", tags=("t",))))

    assert tracker.get_step_writes() == [
        {"op": "append", "path": ["notes"], "values": [{"content": "c", "tags": ["t"]}]}
    ]


def test_assigned_values_are_copied() -> None:
    value = {"list": [1]}
    tracker = StateTracker({})
    tracker.update(lambda draft: draft.__setitem__("v", value))
    value["list"].append(2)

    assert tracker.get_state().v == {"list": [1]}


def test_assigning_a_draft_stores_its_current_value() -> None:
    def change(draft: Any) -> None:
        draft.copy_of_a = draft.a
        draft.a.x = 2  # later change to a does not reach the copy

    tracker = _run({"a": {"x": 1}}, change)

    assert tracker.get_state() == {"a": {"x": 2}, "copy_of_a": {"x": 1}}


# --- list drafts ----------------------------------------------------------------------


def test_in_place_appends_are_appends_in_delta_mode() -> None:
    def change(draft: Any) -> None:
        draft.notes.append(1)
        draft.notes.extend([2, 3])
        draft.notes += [4]
        draft.notes.insert(99, 5)
        draft.notes[len(draft.notes) :] = [6]
        draft.nested.lists[0] += ["y"]  # list inside a list: a change to the outer list

    tracker = _run({"notes": [0], "nested": {"lists": [["x"]]}}, change)

    assert tracker.get_step_writes() == [
        {"op": "append", "path": ["notes"], "values": [1, 2, 3, 4, 5, 6]},
        {"op": "replace", "path": ["nested", "lists"], "value": [["x", "y"]]},
    ]


def test_augmented_assignment_keeps_other_references_to_the_draft_live() -> None:
    def change(draft: Any) -> None:
        notes, first = draft.notes, draft.lists[0]
        draft.notes += [1]
        draft.lists[0] += [1]
        notes.append(2)  # still the same array, as with plain lists
        first.append(2)

    tracker = _run({"notes": [], "lists": [[]]}, change)

    assert tracker.get_state() == {"notes": [1, 2], "lists": [[1, 2]]}


def test_changing_an_item_appended_in_the_same_update_keeps_it_an_append() -> None:
    def change(draft: Any) -> None:
        draft.notes.append({"n": 1})
        draft.notes[-1].n = 2
        draft.notes.append("drop me")
        del draft.notes[-1]

    tracker = _run({"notes": ["old"]}, change)

    assert tracker.get_step_writes() == [{"op": "append", "path": ["notes"], "values": [{"n": 2}]}]


def test_nested_array_appends_write_at_their_path() -> None:
    def change(draft: Any) -> None:
        draft.user.tags.append("t")

    tracker = _run({"user": {"tags": [], "name": "a"}}, change)

    assert tracker.get_rfc6902_patches() == [{"op": "add", "path": "/user/tags/-", "value": "t"}]


@pytest.mark.parametrize(
    ("fn", "expected"),
    [
        (lambda xs: xs.__setitem__(0, 9), [9, 2, 3]),
        (lambda xs: xs.__delitem__(slice(0, 2)), [3]),
        (lambda xs: xs.__setitem__(slice(1, 2), ["a", "b"]), [1, "a", "b", 3]),
        (lambda xs: xs.__setitem__(slice(None, None, 2), [0, 0]), [0, 2, 0]),
        (lambda xs: xs.insert(0, 0), [0, 1, 2, 3]),
        (lambda xs: xs.insert(-1, 0), [1, 2, 0, 3]),
        (lambda xs: xs.pop(0), [2, 3]),
        (lambda xs: xs.remove(2), [1, 3]),
        (lambda xs: xs.reverse(), [3, 2, 1]),
        (lambda xs: xs.sort(reverse=True), [3, 2, 1]),
        (lambda xs: xs.sort(key=lambda x: x % 3), [3, 1, 2]),
        (lambda xs: xs.clear(), []),
    ],
)
def test_other_list_changes_replace_the_whole_array(fn: Any, expected: list[Any]) -> None:
    plain = [1, 2, 3]
    fn(plain)
    assert plain == expected  # the draft must do what a list does

    tracker = _run({"xs": [1, 2, 3]}, lambda draft: fn(draft.xs))

    assert tracker.get_state().xs == expected
    assert tracker.get_step_writes() == [{"op": "replace", "path": ["xs"], "value": expected}]


def test_list_reads() -> None:
    def check(draft: Any) -> None:
        xs = draft.xs
        assert len(xs) == 4 and xs[-1] == {"k": 1} and xs[1:3] == [2, 3]
        assert list(xs) == [1, 2, 3, {"k": 1}] and 3 in xs and xs.index(3) == 2 and xs.count(2) == 1
        assert next(reversed(xs)) == {"k": 1}
        assert xs + [5] == [1, 2, 3, {"k": 1}, 5] and [0] + xs == [0, 1, 2, 3, {"k": 1}]  # noqa: RUF005 (tests __add__)
        with pytest.raises(IndexError):
            xs[4]

    _run({"xs": [1, 2, 3, {"k": 1}]}, check)


def test_pop_returns_a_plain_copy() -> None:
    popped: list[Any] = []

    def change(draft: Any) -> None:
        popped.append(draft.xs.pop())
        popped.append(draft.obj.pop("inner"))

    _run({"xs": [{"a": [1]}], "obj": {"inner": {"b": 2}}}, change)

    assert popped == [{"a": [1]}, {"b": 2}]
    assert type(popped[0]) is dict and type(popped[0]["a"]) is list


def test_sort_without_key_sorts_nested_lists_like_python() -> None:
    tracker = _run({"xs": [[2], [1, 5], [1]]}, lambda draft: draft.xs.sort())

    assert tracker.get_state().xs == [[1], [1, 5], [2]]


def test_list_draft_index_errors_match_list() -> None:
    def check(draft: Any) -> None:
        with pytest.raises(IndexError):
            draft.xs.pop()
        with pytest.raises(IndexError):
            draft.xs[0] = 1
        with pytest.raises(ValueError):
            draft.xs.remove(1)

    _run({"xs": []}, check)


# --- draft lifetime -------------------------------------------------------------------


def test_drafts_cannot_be_used_after_update() -> None:
    kept: list[Any] = []
    tracker = _run({"xs": [], "user": {}}, lambda draft: kept.extend([draft, draft.xs, draft.user]))

    for draft in kept:
        with pytest.raises(StateError, match="update"):
            len(draft)
    with pytest.raises(StateError):
        kept[1].append(1)
    assert "finished update" in repr(kept[0])
    assert tracker.get_state() == {"xs": [], "user": {}}


def test_update_is_not_reentrant() -> None:
    tracker = StateTracker({"a": 0})

    with pytest.raises(StateError, match="inside another update"):
        tracker.update(lambda draft: tracker.update(lambda inner: None))
    assert tracker.update(lambda draft: draft.__setitem__("a", 1)).a == 1


def test_async_update_functions_are_refused() -> None:
    tracker = StateTracker({"a": 0})

    async def change(draft: Any) -> None:
        draft.a = 1

    with pytest.raises(StateError, match="synchronous"):
        tracker.update(change)
    assert tracker.get_state().a == 0


def test_draft_copies_and_pickling() -> None:
    def check(draft: Any) -> None:
        assert copy.deepcopy(draft.user) == {"n": [1]} and type(copy.copy(draft.user)) is dict
        assert draft.user.dump() == {"n": [1]} and draft.user.n.dump() == [1]
        assert repr(draft.user) == "DictDraft({'n': [1]})"
        with pytest.raises(TypeError, match="pickle"):
            pickle.dumps(draft.user)

    _run({"user": {"n": [1]}}, check)


def test_update_returns_the_new_state() -> None:
    tracker = StateTracker({"n": 0})

    assert tracker.update(lambda draft: draft.__setitem__("n", 1)) == {"n": 1}
