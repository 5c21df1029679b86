"""The typed records of agent memory that cross to SQL (``_store/memories.py``), and the
checks every memory input passes before any of it is stored.

    >>> write = MemoryWrite.remember(("user", "u-42"), "likes green tea")
    >>> write.content_hash[:12]
    '2b1ba0b3b0d4'
"""

from __future__ import annotations

import hashlib
import json
import math
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from helix_dbos.errors import MemoryInputError

Namespace = tuple[str, ...]
"""Where a memory lives: a path of strings, e.g. ``("user", "u-42")``; searches take a prefix."""

MAX_NAMESPACE_PARTS = 16
MAX_NAMESPACE_PART_CHARS = 200
MAX_TEXT_CHARS = 32_000
"""The longest memory text (and search query) accepted, in characters."""
MAX_METADATA_BYTES = 16_384
MAX_KEY_CHARS = 200
MAX_SEARCH_LIMIT = 1_000

SearchMode = Literal["hybrid", "text", "vector"]
"""How a search ranks: ``"hybrid"`` (text and vector ranks merged), ``"text"`` or ``"vector"``."""
EmbeddingStatus = Literal["pending", "complete", "failed"]


class Memory(BaseModel):
    """One stored memory, as :func:`~helix_dbos.memory.MemoryStore.get` and searches return it."""

    id: int
    namespace: Namespace
    key: str | None = None
    text: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    content_hash: str
    session_id: str | None = None
    """Who wrote it: the session, run, step and tool call (None when written outside a run)."""
    run: int | None = None
    step: int | None = None
    tool_call_id: str | None = None
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None = None
    embedding: EmbeddingStatus | None = None
    """Its embedding in the active space: None when there is no active space (text-only)."""
    embedding_error: str | None = None
    embedding_attempts: int = 0


class MemoryHit(BaseModel):
    """One search result: the memory and its rank in each list that found it (1 = best)."""

    memory: Memory
    score: float
    """Higher is better: the RRF score in hybrid mode, else the text rank or the cosine similarity."""
    text_rank: int | None = None
    vector_rank: int | None = None


class MemoryWrite(BaseModel):
    """A write a tool made through ``ctx.memory``, carried with its step and applied in the
    step's commit transaction."""

    op: Literal["remember", "forget"]
    namespace: Namespace
    key: str | None = None
    text: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    content_hash: str | None = None
    expires_in: float | None = None
    """Seconds from the commit until the memory expires (None: never)."""
    memory_id: int | None = None
    tool_call_id: str | None = None
    """The tool call that made the write (its provenance, with the step's session, run and step)."""

    @classmethod
    def remember(
        cls, namespace: Namespace, text: str, *, key: str | None = None, metadata: dict[str, Any] | None = None,
        expires_in: float | None = None,
    ) -> MemoryWrite:
        """A checked ``remember`` (raises :class:`MemoryInputError` saying what is wrong).

        Args:
            namespace: Where the memory lives, e.g. ``("user", "u-42")``.
            text: What to remember.
            key: Remember under this key: a later ``remember`` with the key replaces it.
            metadata: A JSON object, kept with the memory.
            expires_in: Seconds from the commit until the memory expires.

        Returns:
            The write, with its ``content_hash``.

        Raises:
            MemoryInputError: An input is out of bounds.
        """
        return cls(
            op="remember", namespace=check_namespace(namespace), key=check_key(key), text=check_text(text),
            metadata=check_metadata(metadata), content_hash=content_hash(text), expires_in=check_expiry(expires_in),
        )

    @classmethod
    def forget(cls, namespace: Namespace, *, key: str | None = None, memory_id: int | None = None) -> MemoryWrite:
        """A checked ``forget`` of the memory under ``key`` or with id ``memory_id`` in ``namespace``.

        Args:
            namespace: Where the memory lives.
            key: The memory's key.
            memory_id: The memory's id (instead of ``key``).

        Returns:
            The write.

        Raises:
            MemoryInputError: Not exactly one of ``key`` and ``memory_id``, or an input is
                out of bounds.
        """
        if (key is None) == (memory_id is None):
            raise MemoryInputError("forget takes exactly one of key= or memory_id=")
        return cls(op="forget", namespace=check_namespace(namespace), key=check_key(key), memory_id=memory_id)


class Provenance(BaseModel):
    """Who wrote a memory: the run's session, run, step and tool call."""

    session_id: str | None = None
    run: int | None = None
    step: int | None = None
    tool_call_id: str | None = None


def content_hash(text: str) -> str:
    """The sha256 of the text, hex: an unkeyed memory is stored once per namespace and hash."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def check_namespace(namespace: Any, *, prefix: bool = False) -> Namespace:
    """``namespace`` as a tuple of strings, or :class:`MemoryInputError` saying what is wrong.
    A search's prefix may be empty (every namespace); a memory's namespace may not."""
    if isinstance(namespace, str) or not isinstance(namespace, (tuple, list)):
        raise MemoryInputError(f"a namespace is a tuple of strings such as ('user', 'u-42'), not {namespace!r}")
    parts = tuple(namespace)
    if not parts and not prefix:
        raise MemoryInputError("a memory's namespace needs at least one part, e.g. ('user', 'u-42')")
    if len(parts) > MAX_NAMESPACE_PARTS:
        raise MemoryInputError(f"a namespace has at most {MAX_NAMESPACE_PARTS} parts, not {len(parts)}")
    for part in parts:
        if not isinstance(part, str) or not part:
            raise MemoryInputError(f"each part of a namespace is a non-empty string, not {part!r}")
        if len(part) > MAX_NAMESPACE_PART_CHARS or "\x00" in part:
            raise MemoryInputError(
                f"a namespace part has at most {MAX_NAMESPACE_PART_CHARS} characters and no NUL character"
            )
    return parts


def check_text(text: Any, *, what: str = "a memory's text") -> str:
    if not isinstance(text, str) or not text.strip():
        raise MemoryInputError(f"{what} must be a non-empty string")
    if len(text) > MAX_TEXT_CHARS:
        raise MemoryInputError(f"{what} has at most {MAX_TEXT_CHARS} characters, not {len(text)}")
    if "\x00" in text:
        raise MemoryInputError(f"{what} cannot hold a NUL character (Postgres text cannot store it)")
    return text


def check_key(key: Any) -> str | None:
    if key is None:
        return None
    if not isinstance(key, str) or not key or len(key) > MAX_KEY_CHARS or "\x00" in key:
        raise MemoryInputError(f"a memory key is a string of 1 to {MAX_KEY_CHARS} characters without NUL")
    return key


def check_metadata(metadata: Any) -> dict[str, Any]:
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        raise MemoryInputError(f"memory metadata is a JSON object (a dict), not {type(metadata).__name__}")
    try:
        encoded = json.dumps(metadata, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise MemoryInputError(f"memory metadata must be JSON: {exc}") from None
    if len(encoded.encode()) > MAX_METADATA_BYTES or "\\u0000" in encoded:
        raise MemoryInputError(f"memory metadata is at most {MAX_METADATA_BYTES} bytes of JSON without NUL")
    return dict(metadata)


def check_expiry(expires_in: Any) -> float | None:
    if expires_in is None:
        return None
    valid = isinstance(expires_in, (int, float)) and not isinstance(expires_in, bool)
    if not valid or not math.isfinite(expires_in) or expires_in <= 0:
        raise MemoryInputError(f"expires_in is a positive number of seconds, not {expires_in!r}")
    return float(expires_in)


def check_limit(limit: Any) -> int:
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_SEARCH_LIMIT:
        raise MemoryInputError(f"limit is an integer from 1 to {MAX_SEARCH_LIMIT}, not {limit!r}")
    return limit


def check_mode(mode: Any) -> SearchMode:
    if mode not in ("hybrid", "text", "vector"):
        raise MemoryInputError(f"mode is 'hybrid', 'text' or 'vector', not {mode!r}")
    return mode  # type: ignore[no-any-return]
