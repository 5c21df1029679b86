"""The memory store by database URL: what code outside a run, operators and the
``helix-dbos memory`` commands use. Inside a run, tools use ``ctx.memory``
(:mod:`helix_dbos.memory.context`), whose writes commit with their step.

    store = MemoryStore(url, embedder=MockEmbedder())
    store.remember(("user", "u-42"), "likes green tea")
    store.search(("user", "u-42"), "what does the user drink?")      # [MemoryHit, ...]
    await store.search_async(("user",), "tea", mode="text")
    store.erase(("user", "u-42"))          # {"memories": 1, "vectors": 1, "embeddings": 1}

Every method has an ``_async`` twin that runs it in a worker thread, so async code never
blocks its event loop. Inputs are checked before anything is read or written
(:class:`~helix_dbos.errors.MemoryInputError`).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from helix_dbos._database import validate_url
from helix_dbos._store import memories
from helix_dbos._store.memory_records import (
    Memory, MemoryHit, MemoryWrite, Namespace, Provenance, SearchMode, check_limit, check_namespace,
)
from helix_dbos._store.pools import Pool, create_pool
from helix_dbos.errors import MemoryInputError, VectorSearchUnavailableError
from helix_dbos.memory.embedders import Embedder, space_name
from helix_dbos.memory.search import search

P = ParamSpec("P")
R = TypeVar("R")

TEXT_ONLY_NOTICE = "pgvector is not available on this Postgres: agent memory searches by text only"
"""The one line ``helix-dbos migrate`` and the first vector use say on a Postgres without pgvector."""

STATUSES = ("pending", "complete", "failed")


def vector_available(database_url: str) -> bool:
    """Whether the Postgres at ``database_url`` has pgvector (else memory is text-only)."""
    pool = create_pool(validate_url(database_url))
    try:
        with pool.connection() as conn:
            return memories.vector_available(conn)
    finally:
        pool.close()


def _async_twin(method: Callable[P, R]) -> Callable[P, Any]:
    @functools.wraps(method)
    async def twin(*args: P.args, **kwargs: P.kwargs) -> R:
        return await asyncio.to_thread(method, *args, **kwargs)

    twin.__doc__ = f"The async twin of :meth:`{method.__name__}` (runs it in a worker thread)."
    return twin


class MemoryStore:
    """Memories in the ``helix`` schema of the database at ``database_url``.

    Args:
        database_url: The helix database (migrated: ``helix-dbos migrate``).
        embedder: Embeds search queries for vector and hybrid search; without one,
            hybrid search is text search.
        pool: A connection pool to share instead of making one from the URL.
    """

    def __init__(self, database_url: str | None = None, *, embedder: Embedder | None = None,
                 pool: Pool | None = None) -> None:
        if pool is None:
            if database_url is None:
                raise MemoryInputError("MemoryStore needs database_url= or pool=")
            pool = create_pool(validate_url(database_url))
        self.pool = pool
        self.embedder = embedder

    # --- writes ------------------------------------------------------------------------------

    def remember(
        self, namespace: Namespace, text: str, *, key: str | None = None, metadata: dict[str, Any] | None = None,
        expires_in: float | None = None,
    ) -> Memory:
        """Store a memory now (outside any run) and return it.

        Args:
            namespace: Where it lives, e.g. ``("user", "u-42")``.
            text: What to remember; searchable by its words as soon as this returns.
            key: Remember under this key: a later ``remember`` with the key replaces it.
            metadata: A JSON object, kept with it (searches can filter on it).
            expires_in: Seconds until it expires (searches skip it after that).

        Returns:
            The stored memory. An unkeyed text already in the namespace is returned as stored.

        Raises:
            MemoryInputError: An input is out of bounds; nothing is written.
        """
        write = MemoryWrite.remember(namespace, text, key=key, metadata=metadata, expires_in=expires_in)
        with self.pool.connection() as conn, conn.transaction():
            memory_id = memories.remember(conn, write, Provenance())
            found = memories.get(conn, memory_id)
        assert found is not None
        return found

    def forget(self, namespace: Namespace, *, key: str | None = None, memory_id: int | None = None) -> bool:
        """Delete one memory (by ``key`` or ``memory_id``, in ``namespace``) with its vectors.

        Args:
            namespace: Where the memory lives.
            key: The memory's key.
            memory_id: The memory's id (instead of ``key``).

        Returns:
            False when there was no such memory.

        Raises:
            MemoryInputError: Not exactly one of ``key`` and ``memory_id``, or an input is
                out of bounds; nothing is deleted.
        """
        write = MemoryWrite.forget(namespace, key=key, memory_id=memory_id)
        with self.pool.connection() as conn, conn.transaction():
            return memories.forget(conn, write)

    def erase(self, prefix: Namespace) -> dict[str, int]:
        """Delete every memory under ``prefix`` (a person's data: ``("user", "u-42")``) with
        its vectors and embedding states, in one transaction.

        Args:
            prefix: The namespace prefix to erase (at least one part).

        Returns:
            How many ``memories``, ``vectors`` and ``embeddings`` were deleted.
        """
        prefix = check_namespace(prefix)
        with self.pool.connection() as conn, conn.transaction():
            return memories.erase(conn, prefix)

    def retry_failed(self, prefix: Namespace = ()) -> int:
        """Make the failed embeddings under ``prefix`` pending again; how many. The
        embedding queue takes them up (``helix_dbos.memory.embedding``).

        Args:
            prefix: A namespace prefix; ``()``: every namespace.

        Returns:
            How many embeddings were made pending.
        """
        prefix = check_namespace(prefix, prefix=True)
        with self.pool.connection() as conn, conn.transaction():
            return memories.retry_failed(conn, prefix)

    def delete_expired(self) -> int:
        """Delete the memories whose expiry has passed; how many."""
        with self.pool.connection() as conn, conn.transaction():
            return memories.delete_expired(conn)

    # --- reads -----------------------------------------------------------------------------

    def get(self, memory_id: int) -> Memory | None:
        """The memory with this id, or None.

        Args:
            memory_id: The memory's id.

        Returns:
            The memory, or None when there is none with this id.
        """
        with self.pool.connection() as conn:
            return memories.get(conn, memory_id)

    def list_memories(self, prefix: Namespace = (), *, status: str | None = None, limit: int = 50) -> list[Memory]:
        """Memories under ``prefix``, newest first; ``status`` keeps those whose embedding
        in the active space is ``pending``, ``complete`` or ``failed``.

        Args:
            prefix: A namespace prefix; ``()``: every namespace.
            status: Keep only the memories with this embedding status in the active space.
            limit: At most this many memories.

        Returns:
            The memories, newest first.

        Raises:
            MemoryInputError: An input is out of bounds, or ``status`` is not one of the three.
        """
        prefix, limit = check_namespace(prefix, prefix=True), check_limit(limit)
        if status is not None and status not in STATUSES:
            raise MemoryInputError(f"status is one of {', '.join(STATUSES)}, not {status!r}")
        with self.pool.connection() as conn:
            return memories.list_memories(conn, prefix, status=status, limit=limit)

    def search(
        self, prefix: Namespace, query: str, *, limit: int = 10, mode: SearchMode = "hybrid",
        filter: dict[str, Any] | None = None,
    ) -> list[MemoryHit]:
        """The memories under ``prefix`` that best answer ``query``.

        Args:
            prefix: A namespace prefix: ``("user",)`` searches every user's.
            query: Words to look for (and, with vectors, meaning).
            limit: At most this many hits.
            mode: ``"hybrid"`` (text and vector ranks merged by reciprocal rank fusion,
                k = 60; text only where there are no vectors), ``"text"`` or ``"vector"``.
            filter: Metadata the memories must contain (``{"topic": "food"}``).

        Returns:
            Hits, best first.

        Raises:
            VectorSearchUnavailableError: ``mode="vector"`` where there are no vectors.
        """
        return search(self.pool, self.embedder, prefix, query, limit=limit, mode=mode, filter=filter)

    def namespaces(self, prefix: Namespace = ()) -> list[dict[str, Any]]:
        """Each namespace under ``prefix``: its ``memories``, ``pending`` and ``failed`` counts.

        Args:
            prefix: A namespace prefix; ``()``: every namespace.

        Returns:
            One dict per namespace (its ``namespace`` and the counts), by namespace.
        """
        prefix = check_namespace(prefix, prefix=True)
        with self.pool.connection() as conn:
            return memories.namespaces(conn, prefix)

    def status(self) -> dict[str, Any]:
        """The memory mode (``vector`` or ``text-only``), the embedding spaces, and the
        memories by embedding status in the active space."""
        with self.pool.connection() as conn:
            available = memories.vector_available(conn)
            return {
                "mode": "vector" if available else "text-only",
                "spaces": memories.spaces(conn),
                "counts": memories.status_counts(conn),
            }

    # --- embedding spaces ----------------------------------------------------------------------

    def add_space(self, embedder: Embedder | None = None, *, activate: bool = False) -> dict[str, Any]:
        """Add the embedding space of ``embedder`` (default: the store's): its pgvector
        table and HNSW index, every memory pending in it (the backfill, which the embedding
        queue works through). The first space added is made active.

        Args:
            embedder: The embedder whose space (``model@dimensions``) to add; None: the store's.
            activate: Make the space the active one even when it is not the first.

        Returns:
            The space: its ``name``, ``model``, ``dimensions`` and more.

        Raises:
            MemoryInputError: There is no embedder (none given, and the store has none).
            VectorSearchUnavailableError: This Postgres has no pgvector (text-only).
        """
        embedder = embedder or self.embedder
        if embedder is None:
            raise MemoryInputError("add_space needs an embedder")
        with self.pool.connection() as conn, conn.transaction():
            if not memories.vector_available(conn):
                raise VectorSearchUnavailableError(TEXT_ONLY_NOTICE)
            first = not memories.spaces(conn)
            space = memories.add_space(conn, space_name(embedder), embedder.model, embedder.dimensions)
            if first or activate:
                memories.activate_space(conn, space["name"])
        return space

    def activate_space(self, name: str) -> None:
        """Make the space ``name`` the one vector search uses.

        Args:
            name: The space's name (``model@dimensions``).

        Raises:
            MemoryInputError: There is no space named ``name``.
        """
        with self.pool.connection() as conn, conn.transaction():
            if not memories.activate_space(conn, name):
                raise MemoryInputError(f"no embedding space named {name!r}")

    def drop_space(self, name: str) -> None:
        """Delete the space ``name`` with its vectors (not the active one: activate another first).

        Args:
            name: The space's name (``model@dimensions``).

        Raises:
            MemoryInputError: There is no space named ``name``, or it is the active one.
        """
        with self.pool.connection() as conn, conn.transaction():
            space = memories.space_named(conn, name)
            if space is None:
                raise MemoryInputError(f"no embedding space named {name!r}")
            if space["active"]:
                raise MemoryInputError(f"{name!r} is the active space: activate another before dropping it")
            memories.drop_space(conn, name)

    def dispose(self) -> None:
        """Close the store's connections."""
        self.pool.close()

    remember_async = _async_twin(remember)
    forget_async = _async_twin(forget)
    erase_async = _async_twin(erase)
    retry_failed_async = _async_twin(retry_failed)
    delete_expired_async = _async_twin(delete_expired)
    get_async = _async_twin(get)
    list_memories_async = _async_twin(list_memories)
    search_async = _async_twin(search)
    namespaces_async = _async_twin(namespaces)
    status_async = _async_twin(status)
