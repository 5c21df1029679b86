"""Read-only views of committed state.

:meth:`StateTracker.get_state` returns a :class:`StateDict`: a snapshot that costs
nothing to take (it wraps the immutable state nodes, nothing is copied) and that no
later update changes. It reads like a dict and like a pydantic model::

    >>> from helix_dbos.state import StateTracker
    >>> state = StateTracker({"items": [{"id": 1}], "count": 2}).get_state()
    >>> state.items[0].id, state["count"], len(state.items)
    (1, 2, 1)
    >>> state == {"items": [{"id": 1}], "count": 2}
    True
    >>> state.dump()
    {'items': [{'id': 1}], 'count': 2}
    >>> state["count"] = 3
    Traceback (most recent call last):
    ...
    TypeError: 'StateDict' object does not support item assignment

State keys win over method names: ``state.items`` is the ``items`` key when the state
has one (use ``state["items"]`` or ``state.dump()`` for dict methods then). ``dump()``
(or ``copy.deepcopy``) gives a plain, mutable deep copy, e.g. for ``json.dumps`` or a
pydantic ``model_validate``.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from helix_dbos.state.nodes import AppendedList, ListNode, NodeBacked, is_dunder, plain_of, to_plain

_READ_ONLY = "state is read-only; change it with StateTracker.update()"


def view_of(node: Any) -> Any:
    """``node`` as users may see it: a view for containers, the value itself for scalars."""
    kind = type(node)
    if kind is dict:
        return StateDict(node)
    if kind is list or kind is AppendedList:
        return StateList(node)
    return node


class StateDict(NodeBacked):
    """Read-only view of a JSON object in the state (see the module docs).

    A snapshot remembers the state schema it was found to match, so the
    trackers started from it (the parallel tools of a step) check it once.

    Args:
        node: The object's node in the state.
        matches: The state schema the snapshot was found to match, or None.
    """

    __slots__ = ("_node", "_matches")
    _node: dict[str, Any]
    _matches: type | None

    def __init__(self, node: dict[str, Any], matches: type | None = None) -> None:
        object.__setattr__(self, "_node", node)
        object.__setattr__(self, "_matches", matches)

    def _state_node(self) -> dict[str, Any]:
        return self._node

    def __getitem__(self, key: str) -> Any:
        return view_of(self._node[key])

    def __getattr__(self, name: str) -> Any:
        if name in self._node and not is_dunder(name):
            return view_of(self._node[name])
        method = _DICT_VIEW_METHODS.get(name)
        if method is None:
            raise AttributeError(f"state has no key {name!r}")
        return method.__get__(self)

    def __setattr__(self, name: str, value: Any) -> None:
        raise TypeError(_READ_ONLY)

    def __delattr__(self, name: str) -> None:
        raise TypeError(_READ_ONLY)

    def __iter__(self) -> Iterator[str]:
        return iter(self._node)

    def __len__(self) -> int:
        return len(self._node)

    def __contains__(self, key: object) -> bool:
        return key in self._node

    def __eq__(self, other: object) -> bool:
        return bool(to_plain(self._node) == plain_of(other))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"StateDict({to_plain(self._node)!r})"

    def __reduce__(self) -> tuple[Callable[..., StateDict], tuple[dict[str, Any]]]:
        return (StateDict, (self._dump(),))

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        return self._dump()

    def _dump(self) -> dict[str, Any]:
        plain: dict[str, Any] = to_plain(self._node)
        return plain


_DICT_VIEW_METHODS: dict[str, Any] = {
    "keys": Mapping.keys,
    "values": Mapping.values,
    "items": Mapping.items,
    "get": Mapping.get,
    "dump": StateDict._dump,
}
Mapping.register(StateDict)


class StateList(NodeBacked, Sequence[Any]):
    """Read-only view of a JSON array in the state; indexing and slicing give views too.

    Args:
        node: The array's node in the state.
    """

    __slots__ = ("_node",)
    _node: ListNode

    def __init__(self, node: ListNode) -> None:
        object.__setattr__(self, "_node", node)

    def _state_node(self) -> ListNode:
        return self._node

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return StateList(list(self._node)[index])
        position = operator.index(index)
        size = len(self._node)
        if position < 0:
            position += size
        if not 0 <= position < size:
            raise IndexError("list index out of range")
        return view_of(self._node[position])

    def __setattr__(self, name: str, value: Any) -> None:
        raise TypeError(_READ_ONLY)

    def __len__(self) -> int:
        return len(self._node)

    def __iter__(self) -> Iterator[Any]:
        return map(view_of, self._node)

    def __eq__(self, other: object) -> bool:
        return bool(to_plain(self._node) == plain_of(other))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"StateList({to_plain(self._node)!r})"

    def __reduce__(self) -> tuple[Callable[..., StateList], tuple[list[Any]]]:
        return (StateList, (self.dump(),))

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return self.dump()

    def dump(self) -> list[Any]:
        """A plain, mutable deep copy of this array."""
        plain: list[Any] = to_plain(self._node)
        return plain
