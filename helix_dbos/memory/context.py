"""``ctx.memory``: agent memory as a tool running in a run sees it.

What a tool remembers or forgets is not written at once: it is carried with the tool
step's outcome (in its checkpoint) and applied in the agent step's commit transaction,
so it commits exactly when the step does, and a replayed step writes nothing twice. A
search reads the memories committed so far (not this step's own writes) and is part of
the tool step, so a replay sees the results the first execution saw::

    @tool
    def note_preference(text: str, ctx: ToolContext) -> str:
        owner = ctx.memory.owner()
        ctx.memory.remember(("user", owner), text)
        return "noted"
"""

from __future__ import annotations

from typing import Any

from helix_dbos._store import reads
from helix_dbos._store.memory_records import MemoryHit, MemoryWrite, Namespace, SearchMode
from helix_dbos._store.pools import Pool
from helix_dbos._store.retry import retry_transient
from helix_dbos.memory.embedders import Embedder
from helix_dbos.memory.search import search


class ToolMemory:
    """The memory of one tool call (``ctx.memory``); built by the runtime.

    Args:
        pool: The helix database's connection pool (searches and the owner read it).
        embedder: Embeds search queries; None: hybrid search is text search.
        session_id: The session of the running agent.
        tool_call_id: The call's id, recorded with each write.
    """

    def __init__(self, pool: Pool, embedder: Embedder | None, session_id: str, tool_call_id: str) -> None:
        self._pool = pool
        self._embedder = embedder
        self._session_id = session_id
        self._tool_call_id = tool_call_id
        self.writes: list[MemoryWrite] = []
        """This call's writes so far, in order; the step's commit applies them."""

    def remember(
        self, namespace: Namespace, text: str, *, key: str | None = None, metadata: dict[str, Any] | None = None,
        expires_in: float | None = None,
    ) -> MemoryWrite:
        """Remember ``text`` in ``namespace`` when the step commits (see
        :meth:`helix_dbos.memory.MemoryStore.remember` for the arguments).

        Args:
            namespace: Where it lives, e.g. ``("user", "u-42")``.
            text: What to remember.
            key: Remember under this key: a later ``remember`` with the key replaces it.
            metadata: A JSON object, kept with it (searches can filter on it).
            expires_in: Seconds from the commit until it expires.

        Returns:
            The write, with its ``content_hash``.

        Raises:
            MemoryInputError: An input is out of bounds (the tool gets the error).
        """
        write = MemoryWrite.remember(namespace, text, key=key, metadata=metadata, expires_in=expires_in)
        return self._add(write)

    def update(self, namespace: Namespace, key: str, text: str, *, metadata: dict[str, Any] | None = None) -> MemoryWrite:
        """Replace the memory under ``key`` (or make it) when the step commits.

        Args:
            namespace: Where it lives, e.g. ``("user", "u-42")``.
            key: The memory's key.
            text: Its new text.
            metadata: A JSON object, kept with it (searches can filter on it).

        Returns:
            The write, with its ``content_hash``.

        Raises:
            MemoryInputError: An input is out of bounds (the tool gets the error).
        """
        return self._add(MemoryWrite.remember(namespace, text, key=key, metadata=metadata))

    def forget(self, namespace: Namespace, *, key: str | None = None, memory_id: int | None = None) -> MemoryWrite:
        """Delete the memory under ``key`` (or with ``memory_id``) when the step commits.

        Args:
            namespace: Where the memory lives.
            key: The memory's key.
            memory_id: The memory's id (instead of ``key``).

        Returns:
            The write.

        Raises:
            MemoryInputError: Not exactly one of ``key`` and ``memory_id``, or an input is
                out of bounds (the tool gets the error).
        """
        return self._add(MemoryWrite.forget(namespace, key=key, memory_id=memory_id))

    def search(
        self, prefix: Namespace, query: str, *, limit: int = 10, mode: SearchMode = "hybrid",
        filter: dict[str, Any] | None = None,
    ) -> list[MemoryHit]:
        """The committed memories under ``prefix`` that best answer ``query`` (as
        :meth:`helix_dbos.memory.MemoryStore.search`).

        Args:
            prefix: A namespace prefix: ``("user",)`` searches every user's.
            query: Words to look for (and, with vectors, meaning).
            limit: At most this many hits.
            mode: ``"hybrid"``, ``"text"`` or ``"vector"``.
            filter: Metadata the memories must contain (``{"topic": "food"}``).

        Returns:
            Hits, best first.

        Raises:
            VectorSearchUnavailableError: ``mode="vector"`` where there are no vectors.
        """
        return retry_transient(
            lambda: search(self._pool, self._embedder, prefix, query, limit=limit, mode=mode, filter=filter)
        )

    def owner(self) -> str | None:
        """Who the run's session belongs to (its root's owner; None: nobody)."""

        def read() -> str | None:
            with self._pool.connection() as conn:
                row = reads.get_session_row(conn, self._session_id)
                return row.owner if row is not None else None

        return retry_transient(read)

    def _add(self, write: MemoryWrite) -> MemoryWrite:
        write = write.model_copy(update={"tool_call_id": self._tool_call_id})
        self.writes.append(write)
        return write
