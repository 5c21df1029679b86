"""Checking and converting values that enter the state.

State must be JSON. :func:`to_node` turns a value into a state node, copying it so the
caller's object can no longer change the state, and refuses anything JSON cannot hold,
naming where it sits::

    >>> to_node({"tags": ("a", "b"), "n": 1})
    {'tags': ['a', 'b'], 'n': 1}
    >>> to_node({"tags": {"a", "b"}})
    Traceback (most recent call last):
    ...
    helix_dbos.state.errors.StateError: set is not JSON-serializable (use a list) at /tags

Pydantic models are dumped in JSON mode; drafts and state views are taken as they
stand; ``str``/``int``/``float`` subclasses (enums) become their plain values.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticSerializationError

from helix_dbos.state.errors import StateError
from helix_dbos.state.nodes import NodeBacked


class _Invalid(Exception):
    """Raised inside the walk; ``keys`` collects the path innermost first."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.keys: list[str | int] = []


def to_node(value: Any) -> Any:
    """A fresh state node equal to ``value``, or :class:`StateError` naming the bad part."""
    try:
        return _convert(value, set())
    except _Invalid as invalid:
        raise StateError(invalid.reason, tuple(reversed(invalid.keys))) from None


def _convert(value: Any, active: set[int]) -> Any:
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is float:
        return _finite(value)
    if kind is dict or kind is list:
        return _convert_container(value, active)
    if isinstance(value, NodeBacked):
        return value._state_node()
    return _convert_other(value, active)


def _convert_other(value: Any, active: set[int]) -> Any:
    if isinstance(value, (dict, list, tuple)):
        return _convert_container(value, active)
    if isinstance(value, BaseModel):
        try:
            return _convert(value.model_dump(mode="json"), active)
        except PydanticSerializationError as error:
            raise _Invalid(f"{type(value).__name__} cannot be dumped to JSON: {error}") from None
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return _finite(float(value))
    raise _Invalid(_describe(value))


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise _Invalid(f"{value!r} is not a valid JSON number")
    return value


def _convert_container(value: dict[Any, Any] | list[Any] | tuple[Any, ...], active: set[int]) -> Any:
    marker = id(value)
    if marker in active:
        raise _Invalid("circular reference is not JSON-serializable")
    active.add(marker)
    try:
        if isinstance(value, dict):
            return _convert_object(value, active)
        return _convert_array(value, active)
    finally:
        active.discard(marker)


def _convert_object(value: dict[Any, Any], active: set[int]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, item in value.items():
        if not isinstance(key, str):
            raise _Invalid(f"object key {key!r} ({type(key).__name__}) is not a string")
        key = str.__str__(key)
        try:
            result[key] = _convert(item, active)
        except _Invalid as invalid:
            invalid.keys.append(key)
            raise
    return result


def _convert_array(value: list[Any] | tuple[Any, ...], active: set[int]) -> list[Any]:
    result: list[Any] = []
    for index, item in enumerate(value):
        try:
            result.append(_convert(item, active))
        except _Invalid as invalid:
            invalid.keys.append(index)
            raise
    return result


def _describe(value: Any) -> str:
    name = getattr(value, "__qualname__", None)
    if callable(value) and isinstance(name, str):
        return f"{type(value).__name__} {name!r} is not JSON-serializable"
    if isinstance(value, (set, frozenset)):
        return f"{type(value).__name__} is not JSON-serializable (use a list)"
    return f"{type(value).__name__} is not JSON-serializable"
