"""RFC 6902 JSON Patch: the wire form of step writes.

Patches are derived from step writes, so what is streamed and what is persisted
cannot drift::

    >>> step_writes_to_rfc6902([
    ...     {"op": "append", "path": ["notes"], "values": [{"content": "Note 1"}, {"content": "Note 2"}]},
    ...     {"op": "replace", "path": ["user", "profile", "name"], "value": "Bob"},
    ...     {"op": "replace", "path": ["new"], "value": 1, "created": True},
    ...     {"op": "delete", "path": ["old"]},
    ... ])  # doctest: +NORMALIZE_WHITESPACE
    [{'op': 'add', 'path': '/notes/-', 'value': {'content': 'Note 1'}},
     {'op': 'add', 'path': '/notes/-', 'value': {'content': 'Note 2'}},
     {'op': 'replace', 'path': '/user/profile/name', 'value': 'Bob'},
     {'op': 'add', 'path': '/new', 'value': 1},
     {'op': 'remove', 'path': '/old'}]
    >>> apply_rfc6902({"notes": []}, [{"op": "add", "path": "/notes/-", "value": 1}])
    {'notes': [1]}
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any, Literal

import jsonpatch
import jsonpointer
from typing_extensions import NotRequired, TypedDict

from helix_dbos.state.errors import StateError
from helix_dbos.state.pointer import to_pointer
from helix_dbos.state.writes import StepWrite


class JsonPatchOperation(TypedDict):
    """One RFC 6902 operation: ``add``, ``remove`` or ``replace`` at ``path`` (a JSON Pointer)."""

    op: Literal["add", "remove", "replace"]
    path: str
    value: NotRequired[Any]


def step_writes_to_rfc6902(writes: Iterable[StepWrite]) -> list[JsonPatchOperation]:
    """The RFC 6902 operations for ``writes``: one ``add .../-`` per appended item,
    ``replace`` (``add`` for a created member), ``remove``. Values are shared with the
    writes, not copied.

    Args:
        writes: Step writes, in order.

    Returns:
        The RFC 6902 operations.
    """
    operations: list[JsonPatchOperation] = []
    for write in writes:
        pointer = to_pointer(write["path"])
        if write["op"] == "append":
            operations.extend({"op": "add", "path": f"{pointer}/-", "value": value} for value in write["values"])
        elif write["op"] == "replace":
            operation: Literal["add", "replace"] = "add" if write.get("created") else "replace"
            operations.append({"op": operation, "path": pointer, "value": write["value"]})
        elif write["op"] == "delete":
            operations.append({"op": "remove", "path": pointer})
        else:
            raise StateError(f"unknown step write op {write['op']!r}", write["path"])
    return operations


def apply_rfc6902(state: Mapping[str, Any], patches: Iterable[Mapping[str, Any]]) -> Any:
    """``state`` with ``patches`` applied by the ``jsonpatch`` library; neither is changed.

    Args:
        state: A JSON object.
        patches: RFC 6902 operations, in order.

    Returns:
        The patched state.

    Raises:
        StateError: A patch does not apply.
    """
    try:
        return jsonpatch.apply_patch(state, copy.deepcopy(list(patches)), in_place=False)
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as error:
        raise StateError(f"cannot apply JSON patch: {error}") from error
