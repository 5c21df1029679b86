"""JSON pointers (RFC 6901) for state paths.

Step writes carry paths as lists of object keys; patches and error messages need them
as pointer strings::

    >>> to_pointer(["user", "a/b", "c~d", 0])
    '/user/a~1b/c~0d/0'
    >>> to_pointer([])
    ''
"""

from __future__ import annotations

from collections.abc import Iterable


def to_pointer(parts: Iterable[str | int]) -> str:
    """Escape each key (``~`` as ``~0``, ``/`` as ``~1``) and join them into a pointer."""
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in parts)
