"""Text Postgres cannot store, and the one rule for it.

Postgres ``text`` and ``jsonb`` cannot hold NUL (U+0000), and UTF-8 cannot encode a
surrogate code point (U+D800-U+DFFF; a well-formed Python ``str`` never holds one: a
surrogate pair is decoded into one code point, so any surrogate in a ``str`` is a lone
one). helix-dbos applies one rule at every boundary:

- text a caller hands in (a run's input, a session id, an answer, a reason, any operator
  argument) is refused before anything is written: :func:`require_storable` raises
  :class:`~helix_dbos.errors.UnstorableTextError`, naming the field and the position;
- text produced inside a run (the model's output, tool results and errors, state values,
  events) is made storable with :func:`storable`: each such character becomes U+FFFD,
  before any tool sees it and before anything is checkpointed; the run goes on.

    >>> storable({"a\\x00": ["ok", "x\\ud800y"]})
    {'a\\ufffd': ['ok', 'x\\ufffdy']}
    >>> find_unstorable({"answer": {"items": ["fine", "bad\\x00"]}})
    Unstorable(path='answer.items[1]', position=3, char='\\x00', in_key=False)
    >>> find_unstorable("all fine") is None
    True

Pure: no I/O.
"""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple, overload

from helix_dbos.errors import UnstorableTextError

REPLACEMENT = "\ufffd"
"""What an unstorable character of a run's own text becomes."""

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_UNSTORABLE_IN_JSON = re.compile("\\\\u0000|[\ud800-\udfff]")
"""NUL as JSON writes it, or a lone surrogate (which ``ensure_ascii=False`` leaves as it is)."""


@overload
def storable(value: str) -> str: ...


@overload
def storable(value: None) -> None: ...


@overload
def storable(value: dict[str, Any]) -> dict[str, Any]: ...


@overload
def storable(value: list[Any]) -> list[Any]: ...


def storable(value: Any) -> Any:
    """``value`` with every NUL and lone surrogate replaced by U+FFFD, deep through dicts
    (keys too; two keys that become equal keep the later value), lists and tuples
    (returned as lists); other values unchanged. Returns ``value`` itself when there is
    nothing to replace.

    A container is first looked at whole, as JSON (C code): a NUL is written ``\\u0000``
    there and a lone surrogate as itself, so a value without either is returned at once.
    Only one that may hold some is walked."""
    if isinstance(value, (dict, list, tuple)) and not _may_hold_unstorable(value):
        return value
    return _replaced(value)


def _may_hold_unstorable(value: dict[Any, Any] | list[Any] | tuple[Any, ...]) -> bool:
    """False only when no string of ``value`` holds NUL or a lone surrogate (True also for
    text that merely spells ``\\u0000``, and for values JSON cannot write)."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=lambda _: None)
    except (TypeError, ValueError):
        return True
    return _UNSTORABLE_IN_JSON.search(text) is not None


def _replaced(value: Any) -> Any:
    if isinstance(value, str):
        return _UNSTORABLE.sub(REPLACEMENT, value) if _UNSTORABLE.search(value) else value
    if isinstance(value, dict):
        pairs = [(_replaced(k), _replaced(v)) for k, v in value.items()]
        same = all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(pairs, value.items()))
        return value if same else dict(pairs)
    if isinstance(value, (list, tuple)):
        items = [_replaced(v) for v in value]
        return value if all(a is b for a, b in zip(items, value)) else items
    return value


class Unstorable(NamedTuple):
    """Where the first unstorable character of a value is."""

    path: str
    """The string's place in the value (``""`` for the value itself, ``a.b[2]``)."""
    position: int
    """Index of the character in that string (in the key, when ``in_key``)."""
    char: str
    in_key: bool

    def describe(self, field: str) -> str:
        """One sentence for an error message about ``field``."""
        where = field + (self.path if self.path.startswith("[") or not self.path else f".{self.path}")
        what = "NUL (U+0000)" if self.char == "\x00" else f"a lone surrogate (U+{ord(self.char):04X})"
        place = "a key of " if self.in_key else ""
        return (
            f"{place}{where} has {what} at position {self.position}: Postgres cannot store NUL or lone"
            " surrogates; remove or replace them"
        )


def find_unstorable(value: Any, path: str = "") -> Unstorable | None:
    """The first unstorable character of a JSON value (depth first, keys before their
    values), or None when all of it can be stored."""
    if isinstance(value, str):
        found = _UNSTORABLE.search(value)
        return Unstorable(path, found.start(), found.group(), False) if found else None
    if isinstance(value, dict):
        for key, item in value.items():
            key_text = str(key)
            bad = _UNSTORABLE.search(key_text)
            if bad:
                return Unstorable(path, bad.start(), bad.group(), True)
            inner = find_unstorable(item, f"{path}.{key_text}" if path else key_text)
            if inner:
                return inner
        return None
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            inner = find_unstorable(item, f"{path}[{index}]")
            if inner:
                return inner
    return None


def require_storable(field: str, value: Any) -> None:
    """Refuse caller-given ``value`` (named ``field`` in the message) if Postgres cannot
    store it, with :class:`UnstorableTextError`.

    >>> require_storable("reason", "too\\x00 expensive")
    Traceback (most recent call last):
    ...
    helix_dbos.errors.UnstorableTextError: reason has NUL (U+0000) at position 3: Postgres cannot store NUL or lone surrogates; remove or replace them
    """
    found = find_unstorable(value)
    if found is not None:
        raise UnstorableTextError(found.describe(field), field=field, path=found.path, position=found.position)
