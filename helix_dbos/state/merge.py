"""Merging the step writes of several tool calls, in tool-call order.

Tools of one step run in parallel, each from the same committed base; their writes are
merged in tool-call order:

- appends compose: every tool's appended items survive, in tool-call order (also on top
  of an earlier tool's replacement of that array);
- replaces and deletes are last-writer-wins: a later write to a path supersedes earlier
  writes at or below it, and a later write below an earlier replace is folded into that
  value;
- a write into something an earlier tool deleted (or replaced by a non-object, or an
  append onto a non-array) is dropped: the earlier structural change wins.

::

    >>> tool_a = [{"op": "append", "path": ["notes"], "values": ["a"]},
    ...           {"op": "replace", "path": ["count"], "value": 1}]
    >>> tool_b = [{"op": "append", "path": ["notes"], "values": ["b"]},
    ...           {"op": "replace", "path": ["count"], "value": 2}]
    >>> merge_step_writes([tool_a, tool_b])  # doctest: +NORMALIZE_WHITESPACE
    [{'op': 'append', 'path': ['notes'], 'values': ['a', 'b']},
     {'op': 'replace', 'path': ['count'], 'value': 2}]

Writes computed one after the other (each from the state the previous ones produced)
merge the same way, so ``merge_step_writes([earlier, later])`` accumulates a step. The
result holds at most one write per path and no write below another, so every write
applies to the common base on its own (and its RFC 6902 form is valid there). Values
are copied: the result shares nothing with its inputs.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from helix_dbos.state.errors import StateError
from helix_dbos.state.nodes import to_plain
from helix_dbos.state.writes import StepWrite, StepWrites

_OPS = ("append", "replace", "delete")


def merge_step_writes(writes_in_call_order: Iterable[Iterable[StepWrite]]) -> StepWrites:
    """One op-list equivalent to applying each tool's writes in tool-call order.

    Args:
        writes_in_call_order: Each tool call's writes, in tool-call order.

    Returns:
        The merged writes.
    """
    root = _Slot()
    for writes in writes_in_call_order:
        for write in writes:
            root.insert(write)
    return list(root.writes())


class _Slot:
    """A node of the path tree: a write here, or slots for deeper paths (never both)."""

    __slots__ = ("children", "write")

    def __init__(self) -> None:
        self.write: StepWrite | None = None
        self.children: dict[str, _Slot] = {}

    def insert(self, write: StepWrite) -> None:
        path = write["path"]
        if not path or write["op"] not in _OPS:
            raise StateError(f"not a step write (needs a known op and a non-empty path): {write!r}")
        slot = self
        for depth, key in enumerate(path):
            if slot.write is not None:
                _fold(slot.write, path[depth:], write)
                return
            slot = slot.children.setdefault(key, _Slot())
        slot.combine(write)

    def combine(self, write: StepWrite) -> None:
        """Put ``write`` on this slot, after whatever earlier writes left here."""
        earlier = self.write
        path = list(write["path"])
        if write["op"] == "append":
            self._combine_append(path, write["values"])
        elif write["op"] == "replace":
            created = write.get("created", False) if earlier is None else _created(earlier)
            self._set(_replace(path, to_plain(write["value"]), created))
        else:
            self._set(None if earlier is not None and _created(earlier) else {"op": "delete", "path": path})

    def _combine_append(self, path: list[str], values: list[Any]) -> None:
        earlier = self.write
        if earlier is None:
            if not self.children:
                self.write = {"op": "append", "path": path, "values": to_plain(values)}
        elif earlier["op"] == "append":
            earlier["values"].extend(to_plain(values))
        elif earlier["op"] == "replace" and isinstance(earlier["value"], list):
            earlier["value"].extend(to_plain(values))

    def _set(self, write: StepWrite | None) -> None:
        self.write = write
        self.children.clear()

    def writes(self) -> Iterator[StepWrite]:
        for child in self.children.values():
            if child.write is not None:
                yield child.write
            else:
                yield from child.writes()


def _created(write: StepWrite) -> bool:
    """Whether the member ``write`` sits at was absent from the base (only a created replace says so)."""
    return write["op"] == "replace" and write.get("created", False)


def _replace(path: list[str], value: Any, created: bool) -> StepWrite:
    if created:
        return {"op": "replace", "path": path, "value": value, "created": True}
    return {"op": "replace", "path": path, "value": value}


def _fold(earlier: StepWrite, relative: list[str], write: StepWrite) -> None:
    """Apply ``write`` inside the value of an ``earlier`` write at an ancestor path, if it fits."""
    if earlier["op"] != "replace":
        return  # nothing to write into: the member was deleted (or is an array)
    parent = earlier["value"]
    for key in relative[:-1]:
        if not isinstance(parent, dict) or key not in parent:
            return
        parent = parent[key]
    if not isinstance(parent, dict):
        return
    key = relative[-1]
    if write["op"] == "replace":
        parent[key] = to_plain(write["value"])
    elif write["op"] == "delete":
        parent.pop(key, None)
    elif write["op"] == "append" and isinstance(parent.get(key), list):
        parent[key].extend(to_plain(write["values"]))
