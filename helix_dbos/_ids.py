"""New session ids: time-ordered UUIDs (RFC 9562, version 7).

The id keys a session's row in ``helix.sessions`` and begins the workflow ids of its runs,
so DBOS's checkpoints of those runs are keyed by it (helix's own tables name the session by
its number). Where a new id sorts decides where those rows go in each of these indexes. A random id (version 4)
puts them in the middle, where a full page splits in two halves that stay half empty. A
version-7 id begins with the time in milliseconds, so a new session's rows go at the end of
each index, where Postgres fills a page before it starts the next one::

    >>> from helix_dbos._ids import new_session_id
    >>> first, second = new_session_id(), new_session_id()
    >>> len(first), first[14], first[:8] <= second[:8]
    (36, '7', True)
"""

from __future__ import annotations

import secrets
import time
import uuid

_VERSION_7 = 0x7 << 76
_VARIANT_RFC = 0x2 << 62
_RANDOM_BITS = ((1 << 12) - 1) << 64 | ((1 << 62) - 1)
"""The 74 bits after the timestamp that are neither version nor variant."""


def new_session_id() -> str:
    """A new session id: a version-7 UUID, in its usual 36-character form."""
    millis = time.time_ns() // 1_000_000
    value = millis << 80 | _VERSION_7 | _VARIANT_RFC | (secrets.randbits(80) & _RANDOM_BITS)
    return str(uuid.UUID(int=value))
