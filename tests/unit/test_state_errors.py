"""Refused updates: non-JSON values, schema violations, failing functions. Each leaves the state as it was."""

from __future__ import annotations

import datetime
import enum
import math
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from helix_dbos.state import StateError, StateTracker, StateValidationError

INITIAL = {"user": {"name": "Ann", "tags": ["a"]}, "items": [1, 2], "count": 0}


def _cycle() -> Any:
    value: list[Any] = [1]
    value.append({"back": value})
    return value


def _self_dict() -> Any:
    value: dict[str, Any] = {}
    value["me"] = value
    return value


BAD_VALUES: list[tuple[str, Callable[[], Any], str, str]] = [
    # (name, value factory, where the bad part sits below the assigned value, message)
    ("function", lambda: lambda: 1, "", "function"),
    ("builtin", lambda: print, "", "not JSON-serializable"),
    ("set", lambda: {1, 2}, "", "set is not JSON-serializable"),
    ("frozenset in list", lambda: [1, frozenset()], "/1", "frozenset"),
    ("bytes", lambda: b"x", "", "bytes"),
    ("object", lambda: object(), "", "object is not JSON-serializable"),
    ("datetime in dict", lambda: {"at": datetime.datetime(2024, 1, 1)}, "/at", "datetime"),
    ("nan", lambda: math.nan, "", "nan is not a valid JSON number"),
    ("infinity", lambda: {"x": [math.inf]}, "/x/0", "inf"),
    ("negative infinity", lambda: -math.inf, "", "-inf"),
    ("int key", lambda: {"ok": {1: "x"}}, "/ok", "object key 1 (int) is not a string"),
    ("none key", lambda: {None: 1}, "", "object key None"),
    ("tuple key", lambda: {(1, 2): 1}, "", "is not a string"),
    ("cycle through list", _cycle, "/1/back", "circular reference"),
    ("self dict", _self_dict, "/me", "circular reference"),
]

ASSIGNMENTS: list[tuple[str, Callable[[Any, Any], None], str]] = [
    # (name, how the value goes in, the path it lands at)
    ("attribute", lambda draft, value: setattr(draft.user, "bad", value), "/user/bad"),
    ("item", lambda draft, value: draft.__setitem__("bad", value), "/bad"),
    ("append", lambda draft, value: draft.items.append(value), "/items/2"),
    ("extend", lambda draft, value: draft.user.tags.extend([0, value]), "/user/tags/2"),
    ("insert", lambda draft, value: draft.items.insert(0, value), "/items/0"),
    ("index", lambda draft, value: draft.items.__setitem__(1, value), "/items/1"),
    ("slice", lambda draft, value: draft.items.__setitem__(slice(0, 1), [value]), "/items/0"),
    ("update", lambda draft, value: draft.user.update({"bad": value}), "/user/bad"),
    ("setdefault", lambda draft, value: draft.setdefault("bad", value), "/bad"),
]


@pytest.mark.parametrize(("name", "factory", "below", "message"), BAD_VALUES, ids=[v[0] for v in BAD_VALUES])
@pytest.mark.parametrize(("how", "assign", "at"), ASSIGNMENTS, ids=[a[0] for a in ASSIGNMENTS])
def test_non_json_values_are_refused_with_their_path(
    name: str, factory: Callable[[], Any], below: str, message: str, how: str, assign: Any, at: str
) -> None:
    tracker = StateTracker(INITIAL, array_delta_mode=True)

    def change(draft: Any) -> None:
        draft.count = 99  # an earlier change in the same update is dropped too
        assign(draft, factory())

    with pytest.raises(StateError) as raised:
        tracker.update(change)

    assert raised.value.path == at + below
    assert message in str(raised.value) and f"at {at + below}" in str(raised.value)
    assert tracker.get_state() == INITIAL
    assert tracker.get_step_writes() == []


def test_non_json_initial_state_is_refused() -> None:
    with pytest.raises(StateError, match=r"set is not JSON-serializable .*at /a/0"):
        StateTracker({"a": [{1}]})
    with pytest.raises(StateError, match="must be a JSON object"):
        StateTracker([1, 2])  # type: ignore[arg-type]


def test_non_string_key_through_the_draft_is_refused() -> None:
    tracker = StateTracker({"user": {}})

    with pytest.raises(StateError, match=r"object key 1 .*at /user"):
        tracker.update(lambda draft: draft.user.__setitem__(1, "x"))


def test_enum_and_subclass_values_become_plain_json() -> None:
    class Color(str, enum.Enum):
        RED = "red"

    class Level(enum.IntEnum):
        HIGH = 3

    tracker = StateTracker({})
    tracker.update(lambda draft: draft.update(color=Color.RED, level=Level.HIGH, pair=(1, 2)))

    writes = tracker.get_step_writes()
    assert [write["value"] for write in writes] == ["red", 3, [1, 2]]
    assert [type(write["value"]) for write in writes] == [str, int, list]


def test_an_exception_inside_fn_keeps_nothing() -> None:
    tracker = StateTracker(INITIAL, array_delta_mode=True)

    def change(draft: Any) -> None:
        draft.items.append(3)
        draft.user.name = "Bob"
        del draft.count
        draft.user.tags.sort()
        raise RuntimeError("tool failed")

    with pytest.raises(RuntimeError, match="tool failed"):
        tracker.update(change)

    assert tracker.get_state() == INITIAL
    assert tracker.get_step_writes() == []
    tracker.update(lambda draft: draft.items.append(3))  # later appends are not disturbed
    assert tracker.get_step_writes() == [{"op": "append", "path": ["items"], "values": [3]}]


class Note(BaseModel):
    content: str


class AgentState(BaseModel):
    notes: list[Note]
    count: int = 0


def test_schema_rejects_an_invalid_update_and_keeps_the_state() -> None:
    tracker = StateTracker({"notes": [], "count": 0}, array_delta_mode=True, schema=AgentState)
    tracker.update(lambda draft: draft.notes.append({"content": "ok"}))

    def bad(draft: Any) -> None:
        draft.notes.append({"content": 5})
        draft.count = "many"

    with pytest.raises(StateValidationError, match="state does not match AgentState") as raised:
        tracker.update(bad)

    assert isinstance(raised.value, StateError)
    assert {tuple(error["loc"]) for error in raised.value.errors} == {("notes", 1, "content"), ("count",)}
    assert tracker.get_state() == {"notes": [{"content": "ok"}], "count": 0}
    assert tracker.get_step_writes() == [{"op": "append", "path": ["notes"], "values": [{"content": "ok"}]}]


def test_schema_accepts_valid_updates_and_model_instances() -> None:
    tracker = StateTracker(AgentState(notes=[Note(content="a")]), array_delta_mode=True, schema=AgentState)

    tracker.update(lambda draft: draft.notes.append(Note(content="b")))

    assert tracker.get_state() == {"notes": [{"content": "a"}, {"content": "b"}], "count": 0}


def test_schema_checks_the_initial_state() -> None:
    with pytest.raises(StateValidationError, match="notes"):
        StateTracker({"count": 1}, schema=AgentState)


def test_removing_a_required_field_is_rejected() -> None:
    tracker = StateTracker({"notes": [], "count": 0}, schema=AgentState)

    with pytest.raises(StateValidationError):
        tracker.update(lambda draft: draft.__delitem__("notes"))
    assert tracker.get_state() == {"notes": [], "count": 0}


# --- get_state() is read-only ---------------------------------------------------------


def test_state_view_cannot_be_mutated() -> None:
    tracker = StateTracker({"user": {"name": "Ann"}, "items": [1]})
    state = tracker.get_state()

    with pytest.raises(TypeError):
        state["x"] = 1  # type: ignore[index]
    with pytest.raises(TypeError, match="read-only"):
        state.user.name = "Bob"
    with pytest.raises(TypeError, match="read-only"):
        del state.user
    with pytest.raises(AttributeError):
        state.items.append(2)
    with pytest.raises(TypeError):
        state.items[0] = 5  # type: ignore[index]

    assert tracker.get_state() == {"user": {"name": "Ann"}, "items": [1]}


def test_copies_out_of_the_view_do_not_reach_the_state() -> None:
    import copy

    tracker = StateTracker({"user": {"tags": ["a"]}})
    dumped = tracker.get_state().dump()
    dumped["user"]["tags"].append("b")
    deep = copy.deepcopy(tracker.get_state())
    deep["user"]["tags"].append("c")

    assert tracker.get_state() == {"user": {"tags": ["a"]}}


def test_the_callers_initial_dict_is_copied() -> None:
    initial = {"items": [1], "user": {"name": "Ann"}}
    tracker = StateTracker(initial)
    initial["items"].append(2)
    initial["user"]["name"] = "Bob"

    assert tracker.get_state() == {"items": [1], "user": {"name": "Ann"}}
    tracker.update(lambda draft: draft.items.append(3))
    assert initial["items"] == [1, 2]


def test_an_earlier_snapshot_does_not_change() -> None:
    tracker = StateTracker({"items": [1], "user": {"name": "Ann"}}, array_delta_mode=True)
    before = tracker.get_state()
    items_before = before.items

    def change(draft: Any) -> None:
        draft.items.append(2)
        draft.user.name = "Bob"

    tracker.update(change)

    assert before == {"items": [1], "user": {"name": "Ann"}} and items_before == [1] and len(items_before) == 1
    assert tracker.get_state() == {"items": [1, 2], "user": {"name": "Bob"}}
