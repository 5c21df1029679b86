"""Drafts: the mutable stand-ins for state that :meth:`StateTracker.update` hands out.

A draft behaves like the ``dict`` or ``list`` it stands for, and a dict draft also
reads like a pydantic model (attribute access). Reading a nested object or array
gives a draft of it, so ordinary Python mutates the state::

    >>> from helix_dbos.state import StateTracker
    >>> tracker = StateTracker({"user": {"profile": {"name": "Alice"}}, "notes": []})
    >>> def edit(draft):
    ...     draft.user.profile.name = "Bob"
    ...     draft["notes"].append({"content": "hi"})
    ...     draft.notes += ["more"]
    >>> tracker.update(edit).dump()
    {'user': {'profile': {'name': 'Bob'}}, 'notes': [{'content': 'hi'}, 'more']}

Drafts are copy-on-write: nothing is copied until it is written, and then only the
containers on the written path (a dict is copied shallowly; an array that is only
appended to is not copied at all). Values are checked to be JSON and copied when
assigned, so later changes to the assigned object do not leak into the state;
assigning a draft stores its current value. State keys win over dict method names
(``draft.items`` is the ``items`` key if there is one); keys that clash with the draft's
own underscore attributes need item access. A draft must not be used after its
``update`` returns.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Iterator, Mapping, MutableMapping, MutableSequence
from typing import Any, NoReturn

from helix_dbos.state.errors import StateError
from helix_dbos.state.nodes import ListNode, NodeBacked, extend_list, is_container, is_dunder, plain_of, to_plain
from helix_dbos.state.pointer import to_pointer
from helix_dbos.state.values import to_node

_set = object.__setattr__


class DraftSession:
    """The lifetime of one update: its drafts refuse use once ``active`` is false.

    ``owner`` identifies the tracker, whose array nodes may grow in place.
    """

    __slots__ = ("active", "owner")

    def __init__(self, owner: object) -> None:
        self.active = True
        self.owner = owner


class _Draft(NodeBacked):
    """What dict and list drafts share: the session, the place in the tree, the base node."""

    __slots__ = ("_base", "_key", "_parent", "_session")
    _base: Any
    _key: str | int | None
    _parent: _Draft | None
    _session: DraftSession

    def __init__(self, base: Any, session: DraftSession, parent: _Draft | None, key: str | int | None) -> None:
        _set(self, "_session", session)
        _set(self, "_parent", parent)
        _set(self, "_key", key)
        _set(self, "_base", base)

    def _check(self) -> None:
        if not self._session.active:
            raise StateError("this draft belongs to an update() that has returned; use drafts only inside it")

    def _path(self) -> tuple[str | int, ...]:
        parts: list[str | int] = []
        draft: _Draft = self
        while draft._parent is not None:
            assert draft._key is not None
            parts.append(draft._key)
            draft = draft._parent
        return tuple(reversed(parts))

    def _state_node(self) -> Any:
        self._check()
        return self._finalize()

    def _finalize(self) -> Any:
        """The node for the draft's current value; the draft then continues from that node."""
        raise NotImplementedError

    def _node_for(self, key: str | int, value: Any) -> Any:
        try:
            return to_node(value)
        except StateError as error:
            raise error.under((*self._path(), key)) from None

    def _child(self, node: Any, key: str | int) -> _Draft:
        if type(node) is dict:
            return DictDraft(node, self._session, self, key)
        return ListDraft(node, self._session, self, key)

    def _dump(self) -> Any:
        return to_plain(self._state_node())

    def __eq__(self, other: object) -> bool:
        return bool(self._dump() == plain_of(other))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        if not self._session.active:
            return f"<{type(self).__name__} of a finished update>"
        return f"{type(self).__name__}({self._dump()!r})"

    def __copy__(self) -> Any:
        return self._dump()

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return self._dump()

    def __reduce__(self) -> NoReturn:
        raise TypeError("drafts cannot be pickled; pickle draft.dump() instead")


def _settle(entry: Any) -> Any:
    """A stored entry as a node: drafts are finalized, nodes stay as they are."""
    return entry._finalize() if isinstance(entry, _Draft) else entry


class DictDraft(_Draft):
    """Draft of a JSON object: a mutable mapping whose keys also read as attributes.

    The object is copied at the first write, shallowly; a nested container reads as a
    draft of its own. Users get drafts from :meth:`StateTracker.update`, which makes them.

    Args:
        base: The node it drafts, left unchanged.
        session: The update it belongs to; the draft refuses use after it.
        parent: The draft that handed it out, or None at the root.
        key: Its key or index in the parent.
    """

    __slots__ = ("_children", "_copy")
    _base: dict[str, Any]
    _children: dict[str, _Draft]
    _copy: dict[str, Any] | None

    def __init__(
        self,
        base: dict[str, Any],
        session: DraftSession,
        parent: _Draft | None = None,
        key: str | int | None = None,
    ) -> None:
        super().__init__(base, session, parent, key)
        _set(self, "_copy", None)
        _set(self, "_children", {})

    def _current(self) -> dict[str, Any]:
        copy = self._copy
        return self._base if copy is None else copy

    def _writable(self) -> dict[str, Any]:
        copy = self._copy
        if copy is None:
            copy = dict(self._base)
            _set(self, "_copy", copy)
        return copy

    def __getitem__(self, key: str) -> Any:
        self._check()
        child = self._children.get(key)
        if child is not None:
            return child
        value = self._current()[key]
        if not is_container(value):
            return value
        child = self._child(value, key)
        self._children[key] = child
        return child

    def __setitem__(self, key: str, value: Any) -> None:
        self._check()
        if not isinstance(key, str):
            raise StateError(f"object key {key!r} ({type(key).__name__}) is not a string", self._path())
        key = str.__str__(key)
        child = self._children.get(key)
        if child is not None and value is child:
            return  # `draft.x += [...]` stores the same draft back
        node = self._node_for(key, value)
        self._writable()[key] = node
        self._children.pop(key, None)

    def __delitem__(self, key: str) -> None:
        self._check()
        if key not in self._current():
            raise KeyError(key)
        del self._writable()[key]
        self._children.pop(key, None)

    def __iter__(self) -> Iterator[str]:
        self._check()
        return iter(tuple(self._current()))

    def __len__(self) -> int:
        self._check()
        return len(self._current())

    def __contains__(self, key: object) -> bool:
        self._check()
        return key in self._current()

    def __getattr__(self, name: str) -> Any:
        if is_dunder(name):
            raise AttributeError(name)
        self._check()
        if name in self._current():
            return self[name]
        method = _DICT_DRAFT_METHODS.get(name)
        if method is None:
            raise AttributeError(f"state object at {to_pointer(self._path()) or '/'} has no key {name!r}")
        return method.__get__(self)

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value

    def __delattr__(self, name: str) -> None:
        try:
            del self[name]
        except KeyError:
            raise AttributeError(f"state object at {to_pointer(self._path()) or '/'} has no key {name!r}") from None

    def _pop(self, key: str, *default: Any) -> Any:
        if key not in self:
            if default:
                return default[0]
            raise KeyError(key)
        value = plain_of(self[key])
        del self[key]
        return value

    def _popitem(self) -> tuple[str, Any]:
        self._check()
        current = self._current()
        if not current:
            raise KeyError("popitem(): dictionary is empty")
        key = next(reversed(current))
        return key, self._pop(key)

    def _setdefault(self, key: str, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return self[key]

    def _clear(self) -> None:
        self._check()
        _set(self, "_copy", {})
        self._children.clear()

    def _finalize(self) -> dict[str, Any]:
        current = self._current()
        changed = [
            (key, node) for key, child in self._children.items() if (node := child._finalize()) is not current[key]
        ]
        if self._copy is None and not changed:
            return self._base
        node = self._writable()
        for key, value in changed:
            node[key] = value
        _set(self, "_base", node)
        _set(self, "_copy", None)
        return node


_DICT_DRAFT_METHODS: dict[str, Any] = {
    "keys": Mapping.keys,
    "values": Mapping.values,
    "items": Mapping.items,
    "get": Mapping.get,
    "update": MutableMapping.update,
    "pop": DictDraft._pop,
    "popitem": DictDraft._popitem,
    "setdefault": DictDraft._setdefault,
    "clear": DictDraft._clear,
    "dump": DictDraft._dump,
}
MutableMapping.register(DictDraft)


class ListDraft(_Draft, MutableSequence[Any]):
    """Draft of a JSON array: a mutable sequence with every ``list`` method but ``*``.

    While only appends happen, the array is not copied (the tracker records them as
    ``append`` writes); any other change first makes a shallow copy. ``pop`` returns a
    plain copy of the removed item.

    Users get drafts from :meth:`StateTracker.update`, which makes them.

    Args:
        base: The node it drafts, left unchanged.
        session: The update it belongs to; the draft refuses use after it.
        parent: The draft that handed it out, or None at the root.
        key: Its key or index in the parent.
    """

    __slots__ = ("_appended", "_children", "_copy")

    def __init__(
        self,
        base: ListNode,
        session: DraftSession,
        parent: _Draft | None = None,
        key: str | int | None = None,
    ) -> None:
        super().__init__(base, session, parent, key)
        self._copy: list[Any] | None = None
        self._appended: list[Any] = []
        self._children: dict[int, _Draft] = {}

    # --- reading ---------------------------------------------------------------------

    def _size(self) -> int:
        copy = self._copy
        return len(self._base) + len(self._appended) if copy is None else len(copy)

    def _position(self, index: Any) -> int:
        position = operator.index(index)
        size = self._size()
        if position < 0:
            position += size
        if not 0 <= position < size:
            raise IndexError("list index out of range")
        return position

    def _entry(self, position: int) -> Any:
        """What is stored at ``position``: a node or a draft (no draft is made)."""
        if self._copy is not None:
            return self._copy[position]
        split = len(self._base)
        if position >= split:
            return self._appended[position - split]
        child = self._children.get(position)
        return self._base[position] if child is None else child

    def _read(self, position: int) -> Any:
        entry = self._entry(position)
        if not is_container(entry):
            return entry
        child = self._child(entry, position)
        if self._copy is not None:
            self._copy[position] = child
        elif position >= len(self._base):
            self._appended[position - len(self._base)] = child
        else:
            self._children[position] = child
        return child

    def __getitem__(self, index: Any) -> Any:
        self._check()
        if isinstance(index, slice):
            return [self._read(position) for position in range(*index.indices(self._size()))]
        return self._read(self._position(index))

    def __len__(self) -> int:
        self._check()
        return self._size()

    def __iter__(self) -> Iterator[Any]:
        self._check()
        position = 0
        while position < self._size():
            yield self._read(position)
            position += 1

    def __add__(self, other: Iterable[Any]) -> list[Any]:
        return list(self) + list(other)

    def __radd__(self, other: Iterable[Any]) -> list[Any]:
        return list(other) + list(self)

    def dump(self) -> list[Any]:
        """A plain, mutable deep copy of the array as it stands.

        Returns:
            The array's items as plain data.
        """
        plain: list[Any] = self._dump()
        return plain

    # --- appending (never copies the base) --------------------------------------------

    def append(self, value: Any) -> None:
        """Append ``value``, like ``list.append``.

        Args:
            value: A JSON value.

        Raises:
            StateError: ``value`` is not JSON, or the draft is no longer active.
        """
        self._check()
        self._add([self._node_for(self._size(), value)])

    def extend(self, values: Iterable[Any]) -> None:
        """Append each of ``values``, like ``list.extend``.

        Args:
            values: JSON values.

        Raises:
            StateError: A value is not JSON, or the draft is no longer active.
        """
        self._check()
        start = self._size()
        self._add([self._node_for(start + offset, value) for offset, value in enumerate(list(values))])

    def __iadd__(self, values: Iterable[Any]) -> ListDraft:
        self.extend(values)
        return self

    def _add(self, nodes: list[Any]) -> None:
        if self._copy is None:
            self._appended.extend(nodes)
        else:
            self._copy.extend(nodes)

    # --- other changes ------------------------------------------------------------------

    def __setitem__(self, index: Any, value: Any) -> None:
        self._check()
        if isinstance(index, slice):
            self._assign_slice(index, value)
            return
        position = self._position(index)
        if isinstance(value, _Draft) and value is self._entry(position):
            return  # `draft.xs[0] += [...]` stores the same draft back
        node = self._node_for(position, value)
        split = len(self._base)
        if self._copy is None and position >= split:
            self._appended[position - split] = node
        else:
            self._materialize()[position] = node

    def _assign_slice(self, index: slice, values: Iterable[Any]) -> None:
        items = list(values)
        size = self._size()
        start, _, step = index.indices(size)
        if step == 1 and start == size:
            self.extend(items)
            return
        nodes = [self._node_for(start + offset * step, value) for offset, value in enumerate(items)]
        self._materialize()[index] = nodes

    def __delitem__(self, index: Any) -> None:
        self._check()
        if isinstance(index, slice):
            del self._materialize()[index]
            return
        position = self._position(index)
        split = len(self._base)
        if self._copy is None and position >= split:
            del self._appended[position - split]
        else:
            del self._materialize()[position]

    def insert(self, index: Any, value: Any) -> None:
        """Insert ``value`` before ``index``, like ``list.insert``.

        Args:
            index: The position.
            value: A JSON value.

        Raises:
            StateError: ``value`` is not JSON, or the draft is no longer active.
        """
        self._check()
        size = self._size()
        position = operator.index(index)
        if position < 0:
            position = max(0, position + size)
        if position >= size:
            self.append(value)
            return
        node = self._node_for(position, value)
        self._materialize().insert(position, node)

    def pop(self, index: Any = -1) -> Any:
        """Remove and return the item at ``index``, like ``list.pop``.

        Args:
            index: The position; default the last item.

        Returns:
            A plain copy of the removed item.

        Raises:
            IndexError: The array is empty, or ``index`` is out of range.
        """
        self._check()
        if not self._size():
            raise IndexError("pop from empty list")
        position = self._position(index)
        value = plain_of(self._read(position))
        del self[position]
        return value

    def reverse(self) -> None:
        """Reverse the array in place, like ``list.reverse``."""
        self._check()
        self._materialize().reverse()

    def sort(self, *, key: Any = None, reverse: bool = False) -> None:
        """Sort in place like ``list.sort``; without ``key``, items compare as plain values.

        Args:
            key: A function of an item giving its sort key.
            reverse: Sort in descending order.
        """
        self._check()
        values = [self._read(position) for position in range(self._size())]
        sort_keys = [plain_of(value) for value in values] if key is None else [key(value) for value in values]
        order = sorted(range(len(values)), key=sort_keys.__getitem__, reverse=reverse)
        copy = self._materialize()
        copy[:] = [copy[position] for position in order]

    def clear(self) -> None:
        """Remove every item, like ``list.clear``."""
        self._check()
        if self._copy is None and not len(self._base):
            self._appended.clear()
            return
        self._copy = []
        self._children = {}
        self._appended = []

    def _materialize(self) -> list[Any]:
        copy = self._copy
        if copy is None:
            copy = list(self._base)
            for position, child in self._children.items():
                copy[position] = child
            copy.extend(self._appended)
            self._copy = copy
            self._children = {}
            self._appended = []
        return copy

    # --- finalizing ---------------------------------------------------------------------

    def _finalize(self) -> ListNode:
        if self._copy is None:
            base = self._base
            changed = any(child._finalize() is not base[position] for position, child in self._children.items())
            if not changed:
                return self._finalize_appends() if self._appended else base
        return self._finalize_copy()

    def _finalize_appends(self) -> ListNode:
        split = len(self._base)
        children = dict(self._children)
        children.update(
            (split + offset, entry) for offset, entry in enumerate(self._appended) if isinstance(entry, _Draft)
        )
        node = extend_list(self._base, [_settle(entry) for entry in self._appended], self._session.owner)
        self._rebase(node, children)
        return node

    def _finalize_copy(self) -> list[Any]:
        entries = self._materialize()
        children = {position: entry for position, entry in enumerate(entries) if isinstance(entry, _Draft)}
        node = [_settle(entry) for entry in entries]
        self._rebase(node, children)
        return node

    def _rebase(self, node: ListNode, children: dict[int, _Draft]) -> None:
        self._base = node
        self._copy = None
        self._appended = []
        self._children = children
