"""Step writes: the compact op-list a tool's state changes persist as.

Each write touches one place, named by ``path``, the list of object keys from the state
root (a parsed JSON pointer; ``path[0]`` is the top-level key). A tracker emits at most
one write per top-level key:

- ``append``: in-place appends to the array at ``path`` (array delta mode only);
  they compose with other tools' appends.
- ``replace``: set the value at ``path``; ``created`` is present (``True``) when the
  member did not exist before, which makes its RFC 6902 form an ``add``.
- ``delete``: remove the member at ``path``.

Writes are plain JSON data (lists and dicts), so they pickle, ``json.dumps`` and fit in
``jsonb`` as they are::

    >>> state = {"notes": ["a"], "count": 0, "user": {"name": "Alice"}}
    >>> writes = [
    ...     {"op": "append", "path": ["notes"], "values": ["b"]},
    ...     {"op": "replace", "path": ["user", "name"], "value": "Bob"},
    ...     {"op": "delete", "path": ["count"]},
    ... ]
    >>> apply_step_writes(state, writes)
    {'notes': ['a', 'b'], 'user': {'name': 'Bob'}}
    >>> state["notes"]
    ['a']

Paths only ever go through objects: a change inside an array is written as a replace
of the whole array.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from typing_extensions import NotRequired, TypedDict

from helix_dbos.state.errors import StateError
from helix_dbos.state.nodes import NodeBacked, to_plain


class AppendWrite(TypedDict):
    """Append ``values``, in order, to the array at ``path``."""

    op: Literal["append"]
    path: list[str]
    values: list[Any]


class ReplaceWrite(TypedDict):
    """Set the member at ``path`` to ``value``; ``created`` marks a member that is new."""

    op: Literal["replace"]
    path: list[str]
    value: Any
    created: NotRequired[bool]


class DeleteWrite(TypedDict):
    """Remove the member at ``path``."""

    op: Literal["delete"]
    path: list[str]


StepWrite = AppendWrite | ReplaceWrite | DeleteWrite
"""One change of a top-level key of the state."""
StepWrites = list[StepWrite]
"""A step's changes, in order."""


def apply_step_writes(state: Mapping[str, Any], writes: Iterable[StepWrite]) -> dict[str, Any]:
    """The state with ``writes`` applied in order; ``state`` itself is not changed.

    Only the objects on the written paths are copied: the result shares every untouched
    subtree with ``state`` (treat both as read-only, or deep-copy). Written values are
    copied, so the writes stay independent of the result.

    Args:
        state: A JSON object.
        writes: Step writes, in order.

    Returns:
        The new state.

    Raises:
        StateError: A write's parent is missing or not an object, a delete's member is
            missing, or an append's target is not an array.
    """
    root = to_plain(state._state_node()) if isinstance(state, NodeBacked) else dict(state)
    owned = {id(root)}
    for write in writes:
        _apply(root, write, owned)
    return root


def _apply(root: dict[str, Any], write: StepWrite, owned: set[int]) -> None:
    path = write["path"]
    if not path:
        raise StateError(f"a step write needs a non-empty path: {write!r}")
    parent = _writable_parent(root, path, owned)
    key = path[-1]
    if write["op"] == "replace":
        parent[key] = to_plain(write["value"])
    elif write["op"] == "delete":
        if key not in parent:
            raise StateError("cannot delete a missing member", path)
        del parent[key]
    elif write["op"] == "append":
        target = parent.get(key)
        if not isinstance(target, list):
            raise StateError("cannot append to a missing member or a non-array", path)
        parent[key] = target + to_plain(write["values"])
    else:
        raise StateError(f"unknown step write op {write['op']!r}", path)


def _writable_parent(root: dict[str, Any], path: list[str], owned: set[int]) -> dict[str, Any]:
    node = root
    for depth, key in enumerate(path[:-1]):
        child = node.get(key)
        if not isinstance(child, dict):
            raise StateError("cannot write below a missing member or a non-object", path[: depth + 1])
        if id(child) not in owned:
            child = dict(child)
            node[key] = child
            owned.add(id(child))
        node = child
    return node
