"""State nodes: the tracker's immutable representation of JSON values.

A node is a JSON scalar, a ``dict`` of nodes, a ``list`` of nodes or an
:class:`AppendedList`. Nodes are never changed once built, so successive versions of
the state share every subtree an update did not touch (structural sharing), and a
snapshot taken earlier stays valid for ever. Users never see nodes: they get read-only
views (:mod:`helix_dbos.state.views`), drafts (:mod:`helix_dbos.state.draft`) or plain
copies (:func:`to_plain`)::

    >>> head = [1, 2]
    >>> longer = extend_list(head, [3], owner=object())
    >>> list(longer), head
    ([1, 2, 3], [1, 2])
    >>> appended_items(head, longer)
    [3]
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from itertools import chain, islice
from typing import Any


class AppendedList:
    """A list node: a ``head`` list followed by the first ``size`` items of a ``tail`` list.

    Appending never copies ``head``. The tail grows in place when the node being extended
    is the newest user of its tail and belongs to the same tracker (``owner``); otherwise
    the tail's live prefix is copied. Older nodes read only their own prefix, so they
    never see later items: appends cost O(items appended), whatever the list's length.
    """

    __slots__ = ("head", "owner", "size", "tail")

    def __init__(self, head: list[Any], tail: list[Any], size: int, owner: object) -> None:
        self.head = head
        self.tail = tail
        self.size = size
        self.owner = owner

    def __len__(self) -> int:
        return len(self.head) + self.size

    def __iter__(self) -> Iterator[Any]:
        return chain(self.head, islice(self.tail, self.size))

    def __getitem__(self, index: int) -> Any:
        """Item at a non-negative ``index`` below ``len(self)``."""
        split = len(self.head)
        return self.head[index] if index < split else self.tail[index - split]

    def __repr__(self) -> str:
        return f"AppendedList({list(self)!r})"


ListNode = list[Any] | AppendedList
LIST_TYPES = (list, AppendedList)


class NodeBacked:
    """Base of drafts and views: objects that stand for a state node."""

    __slots__ = ()

    def _state_node(self) -> Any:
        """The node this object currently stands for."""
        raise NotImplementedError


def is_dunder(name: str) -> bool:
    """Whether an attribute name is Python's (``__x__``), never a state key read as an attribute."""
    return name.startswith("__") and name.endswith("__")


def plain_of(value: Any) -> Any:
    """A plain copy of a draft or view; any other value as it is (for ``==`` and ``pop``)."""
    return to_plain(value._state_node()) if isinstance(value, NodeBacked) else value


def is_container(value: Any) -> bool:
    """Whether ``value`` is an object or array node."""
    kind = type(value)
    return kind is dict or kind is list or kind is AppendedList


def extend_list(node: ListNode, items: list[Any], owner: object) -> AppendedList:
    """``node`` followed by ``items`` (a non-empty list of nodes), without copying ``node``."""
    if type(node) is list:
        return AppendedList(node, items, len(items), owner)
    assert isinstance(node, AppendedList)
    if node.owner is owner and len(node.tail) == node.size:
        node.tail.extend(items)
        return AppendedList(node.head, node.tail, node.size + len(items), owner)
    return AppendedList(node.head, node.tail[: node.size] + items, node.size + len(items), owner)


def appended_items(before: Any, after: Any) -> list[Any] | None:
    """The items appended in place to ``before`` to make ``after``, or ``None`` if not so made.

    Only lineage counts: a list that merely starts like ``before`` (a reassignment
    such as ``x = x + [item]``) is not an append.
    """
    if type(after) is not AppendedList:
        return None
    if after.head is before:
        return after.tail[: after.size]
    if (
        type(before) is AppendedList
        and before.head is after.head
        and before.size <= after.size
        and _same_items(before.tail, after.tail, before.size)
    ):
        return after.tail[before.size : after.size]
    return None


def _same_items(first: list[Any], second: list[Any], count: int) -> bool:
    return first is second or all(a is b for a, b in zip(islice(first, count), islice(second, count), strict=True))


_SCALARS = frozenset((str, int, float, bool, type(None)))


def to_plain(node: Any) -> Any:
    """A plain, mutable deep copy of ``node`` (dicts and lists only)."""
    kind = type(node)
    if kind is dict:
        return {key: value if type(value) in _SCALARS else to_plain(value) for key, value in node.items()}
    if kind is list or kind is AppendedList:
        return [value if type(value) in _SCALARS else to_plain(value) for value in node]
    return node


def json_equal(first: Any, second: Any) -> bool:
    """Whether two nodes are the same JSON value (``1``, ``1.0``, ``True``, ``-0.0`` all differ)."""
    if first is second:
        return True
    kind = type(first)
    if kind is dict:
        return (
            type(second) is dict
            and len(first) == len(second)
            and all(key in second and json_equal(value, second[key]) for key, value in first.items())
        )
    if kind is list or kind is AppendedList:
        return type(second) in LIST_TYPES and len(first) == len(second) and all(map(json_equal, first, second))
    if kind is not type(second) or first != second:
        return False
    return kind is not float or math.copysign(1.0, first) == math.copysign(1.0, second)
