"""One search over memories, shared by :class:`~helix_dbos.memory.MemoryStore` and
``ctx.memory``: text, vector, or both merged by reciprocal rank fusion::

    hits = search(pool, embedder, ("user",), "green tea", limit=5, mode="hybrid", filter={})

Hybrid takes each list's best ``CANDIDATES_PER_HIT * limit`` and scores a memory
``sum(1 / (RRF_K + rank))`` over the lists that found it, so a pending memory (no vector
yet) is found by its words. Without an active embedding space (text-only Postgres, or none
added) or without an embedder of that space for the query (during a model switch, until the
new space is active), or when the query cannot be embedded (the provider is down),
hybrid is text search; ``mode="vector"``
raises :class:`~helix_dbos.errors.VectorSearchUnavailableError` saying which is missing.
"""

from __future__ import annotations

import logging
from typing import Any

from helix_dbos._store import memories
from helix_dbos._store.memory_records import (
    MemoryHit, Namespace, SearchMode, check_limit, check_metadata, check_mode, check_namespace, check_text,
)
from helix_dbos._store.pools import Pool
from helix_dbos.errors import VectorSearchUnavailableError
from helix_dbos.memory.embedders import Embedder, EmbeddingError, embed_one, space_name

logger = logging.getLogger("helix_dbos")

RRF_K = 60
CANDIDATES_PER_HIT = 4


def search(
    pool: Pool, embedder: Embedder | None, prefix: Namespace, query: str, *, limit: int, mode: SearchMode,
    filter: dict[str, Any] | None,
) -> list[MemoryHit]:
    """The memories under ``prefix`` that best answer ``query`` (inputs checked first)."""
    prefix = check_namespace(prefix, prefix=True)
    query = check_text(query, what="a search query")
    limit, mode, wanted = check_limit(limit), check_mode(mode), check_metadata(filter)
    with pool.connection() as conn:
        space = memories.active_space(conn)
    usable = space is not None and embedder is not None and space_name(embedder) == space["name"]
    if mode == "text" or (mode == "hybrid" and not usable):
        return _text_hits(pool, prefix, query, limit, wanted)
    if space is None:
        raise VectorSearchUnavailableError(
            "no embedding space is active: memory searches by text only here"
            " (add one with MemoryStore.add_space on a Postgres with pgvector)"
        )
    if embedder is None or not usable:
        raise VectorSearchUnavailableError(
            f"vector search embeds the query with the active space's model ({space['name']}),"
            f" and this search's embedder is {space_name(embedder) if embedder else 'none'}"
        )
    try:
        vector = embed_one(embedder, query, space["dimensions"])
    except EmbeddingError:
        if mode == "vector":
            raise
        logger.warning("memory search: the query could not be embedded, searching by text only", exc_info=True)
        return _text_hits(pool, prefix, query, limit, wanted)
    candidates = limit if mode == "vector" else limit * CANDIDATES_PER_HIT
    with pool.connection() as conn, conn.transaction():
        near = memories.vector_search(conn, space, prefix, vector, limit=candidates, filter=wanted)
    if mode == "vector":
        return [MemoryHit(memory=m, score=s, vector_rank=i) for i, (m, s) in enumerate(near, 1)]
    with pool.connection() as conn:
        words = memories.text_search(conn, prefix, query, limit=candidates, filter=wanted)
    return fuse(words, near, limit)


def _text_hits(pool: Pool, prefix: Namespace, query: str, limit: int, wanted: dict[str, Any]) -> list[MemoryHit]:
    with pool.connection() as conn:
        found = memories.text_search(conn, prefix, query, limit=limit, filter=wanted)
    return [MemoryHit(memory=m, score=s, text_rank=i) for i, (m, s) in enumerate(found, 1)]


def fuse(words: list[tuple[Any, float]], near: list[tuple[Any, float]], limit: int) -> list[MemoryHit]:
    """Reciprocal rank fusion (k = ``RRF_K``) of a text and a vector ranking, best first
    (ties: the newer memory first)."""
    hits: dict[int, MemoryHit] = {}
    for rank, (memory, _) in enumerate(words, 1):
        hits[memory.id] = MemoryHit(memory=memory, score=1 / (RRF_K + rank), text_rank=rank)
    for rank, (memory, _) in enumerate(near, 1):
        hit = hits.setdefault(memory.id, MemoryHit(memory=memory, score=0.0))
        hit.score += 1 / (RRF_K + rank)
        hit.vector_rank = rank
    return sorted(hits.values(), key=lambda h: (-h.score, -h.memory.id))[:limit]
