"""Classifying what changed between two versions of the state into step writes.

The tracker keeps the state as it was at the last reset and as it is now; both are
immutable nodes sharing every untouched subtree, so the comparison only walks what
changed. Per top-level key it yields at most one write:

- the deepest place under that key that holds every change: a single changed member
  is written at its own path (``draft.user.profile.name = "Bob"`` replaces
  ``["user", "profile", "name"]``), several changed members replace their common object;
- a change inside an array replaces the whole array, except that in array delta mode an
  array only appended to *in place* becomes an ``append`` of the new items;
- a member that disappeared is a ``delete``; one that appeared is a ``replace`` with
  ``created``.

::

    >>> before = {"user": {"profile": {"name": "Alice"}}, "items": [1, 2, 3]}
    >>> after = {"user": {"profile": {"name": "Bob"}}, "items": [1, 3]}
    >>> compute_step_writes(before, after, array_delta_mode=False)  # doctest: +NORMALIZE_WHITESPACE
    [{'op': 'replace', 'path': ['user', 'profile', 'name'], 'value': 'Bob'},
     {'op': 'replace', 'path': ['items'], 'value': [1, 3]}]
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain
from typing import Any, NamedTuple

from helix_dbos.state.nodes import appended_items, json_equal, to_plain
from helix_dbos.state.writes import StepWrite, StepWrites


class _Change(NamedTuple):
    """A write still holding nodes; it becomes plain JSON only if it is kept."""

    op: str
    path: list[str]
    node: Any = None
    created: bool = False

    def to_write(self) -> StepWrite:
        if self.op == "append":
            return {"op": "append", "path": self.path, "values": [to_plain(item) for item in self.node]}
        if self.op == "delete":
            return {"op": "delete", "path": self.path}
        if self.created:
            return {"op": "replace", "path": self.path, "value": to_plain(self.node), "created": True}
        return {"op": "replace", "path": self.path, "value": to_plain(self.node)}


def compute_step_writes(before: dict[str, Any], after: dict[str, Any], array_delta_mode: bool) -> StepWrites:
    """The writes that turn state node ``before`` into ``after``, one per changed top-level key."""
    if before is after:
        return []
    return [change.to_write() for change in _Differ(array_delta_mode).member_changes([], before, after)]


class _Differ:
    def __init__(self, array_delta_mode: bool) -> None:
        self.array_delta_mode = array_delta_mode

    def member_changes(self, path: list[str], before: dict[str, Any], after: dict[str, Any]) -> Iterator[_Change]:
        """One change per member of an object that differs, in ``after``'s key order, deletions last."""
        for key in chain(after, (key for key in before if key not in after)):
            if key not in before:
                yield _Change("replace", [*path, key], after[key], created=True)
            elif key not in after:
                yield _Change("delete", [*path, key])
            else:
                change = self.value_change([*path, key], before[key], after[key])
                if change is not None:
                    yield change

    def value_change(self, path: list[str], before: Any, after: Any) -> _Change | None:
        if before is after:
            return None
        if type(before) is dict and type(after) is dict:
            return self.object_change(path, before, after)
        if self.array_delta_mode:
            appended = appended_items(before, after)
            if appended is not None:
                return _Change("append", path, appended) if appended else None
        return None if json_equal(before, after) else _Change("replace", path, after)

    def object_change(self, path: list[str], before: dict[str, Any], after: dict[str, Any]) -> _Change | None:
        changes = self.member_changes(path, before, after)
        first = next(changes, None)
        if first is None or next(changes, None) is None:
            return first
        return _Change("replace", path, after)
