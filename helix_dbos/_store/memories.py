"""Every SQL statement of agent memory (tables of migration ``008_memory.sql``). Each
function runs inside the caller's transaction, on a psycopg connection::

    with pool.connection() as conn, conn.transaction():
        memory_id = remember(conn, MemoryWrite.remember(("user", "u-42"), "likes tea"), Provenance())

A namespace prefix matches every namespace that starts with it (``("user",)`` matches
``("user", "u-42")``); the GIN index on ``namespace`` narrows the rows (``@>``), the
slice comparison keeps only true prefixes.

Vectors live in one table per embedding space, ``helix.memory_vectors_<id>``, made by
:func:`add_space` where pgvector is available: ``vector(d)`` with an HNSW index, or
``halfvec(d)`` above 2,000 dimensions (HNSW's limit for ``vector``). Each vector row
records the ``content_hash`` it was computed from; a search uses only the vectors whose
hash is the memory's, and :func:`write_vector` stores one only when the memory still has
that hash.
"""

from __future__ import annotations

from typing import Any

from psycopg import Connection

from helix_dbos._store.memory_records import Memory, MemoryWrite, Namespace, Provenance
from helix_dbos._store.statements import all_rows, execute, first_row, first_value, to_json

HALFVEC_ABOVE = 2000
"""Dimensions above which a space stores ``halfvec`` (HNSW indexes ``vector`` up to 2,000)."""

_PREFIX = "m.namespace @> CAST(%(prefix)s AS text[]) AND m.namespace[1:cardinality(CAST(%(prefix)s AS text[]))] = CAST(%(prefix)s AS text[])"
_LIVE = "(m.expires_at IS NULL OR m.expires_at > now())"
_FILTER = "m.metadata @> CAST(%(filter)s AS jsonb)"
_COLUMNS = (
    "m.id, m.namespace, m.key, m.content AS text, m.metadata, m.content_hash, m.session_id, m.run, m.step,"
    " m.tool_call_id, m.created_at, m.updated_at, m.expires_at,"
    " e.status AS embedding, e.error AS embedding_error, COALESCE(e.attempts, 0) AS embedding_attempts"
)
_ACTIVE_EMBEDDING = (
    " LEFT JOIN helix.memory_embeddings e ON e.memory_id = m.id"
    " AND e.space_id = (SELECT id FROM helix.memory_spaces WHERE active)"
)


def _memory(row: dict[str, Any]) -> Memory:
    return Memory.model_validate({**row, "namespace": tuple(row["namespace"])})


# --- writes ----------------------------------------------------------------------------


def apply_writes(conn: Connection[Any], writes: list[MemoryWrite], session_id: str, run: int, step: int) -> None:
    """Apply a step's memory writes in order (inside its commit transaction)."""
    for write in writes:
        if write.op == "remember":
            by = Provenance(session_id=session_id, run=run, step=step, tool_call_id=write.tool_call_id)
            remember(conn, write, by)
        else:
            forget(conn, write)


def remember(conn: Connection[Any], write: MemoryWrite, provenance: Provenance) -> int:
    """Store the memory and return its id. An unkeyed text already in the namespace is
    not stored again (its row is returned; also against a concurrent writer). A key
    already in the namespace gets the new text, metadata and expiry. A new or changed
    text is pending in every embedding space."""
    params = {
        "ns": list(write.namespace), "key": write.key, "text": write.text, "meta": to_json(write.metadata),
        "hash": write.content_hash, "exp": write.expires_in, **provenance.model_dump(),
    }
    target = "(namespace, key) WHERE key IS NOT NULL" if write.key is not None else "(namespace, content_hash) WHERE key IS NULL"
    update = (
        "content = EXCLUDED.content, content_hash = EXCLUDED.content_hash, metadata = EXCLUDED.metadata,"
        " expires_at = EXCLUDED.expires_at, session_id = EXCLUDED.session_id, run = EXCLUDED.run,"
        " step = EXCLUDED.step, tool_call_id = EXCLUDED.tool_call_id, updated_at = now()"
        if write.key is not None
        else "updated_at = now()"
    )
    memory_id = int(
        first_value(
            conn,
            (
                "INSERT INTO helix.memories (namespace, key, content, metadata, content_hash, session_id, run, step,"
                " tool_call_id, expires_at)"
                " VALUES (CAST(%(ns)s AS text[]), %(key)s, %(text)s, CAST(%(meta)s AS jsonb), %(hash)s, %(session_id)s, %(run)s, %(step)s,"
                " %(tool_call_id)s, CASE WHEN CAST(%(exp)s AS double precision) IS NULL THEN NULL"
                "  ELSE now() + make_interval(secs => CAST(%(exp)s AS double precision)) END)"
                f" ON CONFLICT {target} DO UPDATE SET {update} RETURNING id"
            ),
            params,
        )
    )
    execute(
        conn,
        (
            "INSERT INTO helix.memory_embeddings (memory_id, space_id, content_hash)"
            " SELECT %(id)s, s.id, %(hash)s FROM helix.memory_spaces s"
            " ON CONFLICT (memory_id, space_id) DO UPDATE SET status = 'pending', content_hash = EXCLUDED.content_hash,"
            "  attempts = 0, error = NULL, updated_at = now(), generation = helix.memory_embeddings.generation + 1"
            " WHERE helix.memory_embeddings.content_hash <> EXCLUDED.content_hash"
        ),
        {"id": memory_id, "hash": write.content_hash},
    )
    return memory_id


def forget(conn: Connection[Any], write: MemoryWrite) -> bool:
    """Delete the memory under ``write.key`` (or with ``write.memory_id``) in its namespace,
    with its vectors; False when there was none."""
    row = first_row(
        conn,
        (
            "DELETE FROM helix.memories WHERE namespace = CAST(%(ns)s AS text[])"
            " AND (key = %(key)s OR id = %(id)s) RETURNING id"
        ),
        {"ns": list(write.namespace), "key": write.key, "id": write.memory_id},
    )
    return row is not None


def erase(conn: Connection[Any], prefix: Namespace) -> dict[str, int]:
    """Delete every memory under ``prefix``, its embedding states and vectors; the counts."""
    params = {"prefix": list(prefix)}
    counts = {"memories": 0, "vectors": 0, "embeddings": 0}
    ids = f"SELECT m.id FROM helix.memories m WHERE {_PREFIX}"
    for space in spaces(conn):
        if space["has_vectors"]:
            counts["vectors"] += execute(
                conn, f"DELETE FROM helix.{vector_table(space['id'])} WHERE memory_id IN ({ids})", params
            )
    counts["embeddings"] = execute(conn, f"DELETE FROM helix.memory_embeddings WHERE memory_id IN ({ids})", params)
    counts["memories"] = execute(conn, f"DELETE FROM helix.memories m WHERE {_PREFIX}", params)
    return counts


def delete_expired(conn: Connection[Any]) -> int:
    """Delete the memories whose expiry has passed (their vectors go with them); how many."""
    return execute(conn, "DELETE FROM helix.memories WHERE expires_at <= now()")


# --- reads -----------------------------------------------------------------------------


def get(conn: Connection[Any], memory_id: int) -> Memory | None:
    row = first_row(
        conn, f"SELECT {_COLUMNS} FROM helix.memories m{_ACTIVE_EMBEDDING} WHERE m.id = %(id)s", {"id": memory_id}
    )
    return _memory(row) if row is not None else None


def list_memories(
    conn: Connection[Any], prefix: Namespace, *, status: str | None = None, limit: int = 50, after_id: int | None = None
) -> list[Memory]:
    """Memories under ``prefix``, newest first; ``status`` (pending | complete | failed)
    keeps those whose embedding in the active space has it."""
    where = [_PREFIX]
    if status is not None:
        where.append("e.status = %(status)s")
    if after_id is not None:
        where.append("m.id < %(after)s")
    rows = all_rows(
        conn,
        (
            f"SELECT {_COLUMNS} FROM helix.memories m{_ACTIVE_EMBEDDING} WHERE {' AND '.join(where)}"
            " ORDER BY m.id DESC LIMIT %(limit)s"
        ),
        {"prefix": list(prefix), "status": status, "limit": limit, "after": after_id},
    )
    return [_memory(row) for row in rows]


def text_search(
    conn: Connection[Any], prefix: Namespace, query: str, *, limit: int, filter: dict[str, Any]
) -> list[tuple[Memory, float]]:
    """Memories under ``prefix`` that share a word (stemmed, English) with ``query``, best
    first (``ts_rank_cd``; more shared words rank higher), unexpired and matching ``filter``."""
    rows = all_rows(
        conn,
        (
            f"SELECT {_COLUMNS}, ts_rank_cd(m.search, q) AS score"
            " FROM helix.memories m"
            f"{_ACTIVE_EMBEDDING},"
            " CAST(NULLIF(replace(CAST(plainto_tsquery('english', %(query)s) AS text), ' & ', ' | '), '') AS tsquery) q"
            f" WHERE {_PREFIX} AND m.search @@ q AND {_LIVE} AND {_FILTER}"
            " ORDER BY score DESC, m.id DESC LIMIT %(limit)s"
        ),
        {"prefix": list(prefix), "query": query, "limit": limit, "filter": to_json(filter)},
    )
    return [(_memory(row), float(row["score"])) for row in rows]


def vector_search(
    conn: Connection[Any], space: dict[str, Any], prefix: Namespace, vector: list[float], *, limit: int,
    filter: dict[str, Any],
) -> list[tuple[Memory, float]]:
    """Memories under ``prefix`` nearest to ``vector`` in ``space`` (cosine similarity,
    best first), among those whose vector is of their current text. Runs in a transaction
    (``SET LOCAL`` lets the HNSW scan go on until ``limit`` rows pass the filters)."""
    kind = vector_type(space["dimensions"])
    execute(conn, "SET LOCAL hnsw.iterative_scan = relaxed_order")
    rows = all_rows(
        conn,
        (
            f"SELECT {_COLUMNS}, 1 - (v.embedding <=> CAST(%(vec)s AS {kind})) AS score"
            f" FROM helix.{vector_table(space['id'])} v JOIN helix.memories m ON m.id = v.memory_id"
            f"{_ACTIVE_EMBEDDING}"
            f" WHERE {_PREFIX} AND v.content_hash = m.content_hash AND {_LIVE} AND {_FILTER}"
            f" ORDER BY v.embedding <=> CAST(%(vec)s AS {kind}) LIMIT %(limit)s"
        ),
        {"prefix": list(prefix), "vec": vector_literal(vector), "limit": limit, "filter": to_json(filter)},
    )
    return [(_memory(row), float(row["score"])) for row in rows]


def namespaces(conn: Connection[Any], prefix: Namespace = (), limit: int = 200) -> list[dict[str, Any]]:
    """Each namespace under ``prefix`` with its memory count and, in the active space,
    how many are pending and failed."""
    rows = all_rows(
        conn,
        (
            "SELECT m.namespace, count(*) AS memories,"
            " count(*) FILTER (WHERE e.status = 'pending') AS pending,"
            " count(*) FILTER (WHERE e.status = 'failed') AS failed"
            f" FROM helix.memories m{_ACTIVE_EMBEDDING} WHERE {_PREFIX}"
            " GROUP BY m.namespace ORDER BY m.namespace LIMIT %(limit)s"
        ),
        {"prefix": list(prefix), "limit": limit},
    )
    return [{**row, "namespace": tuple(row["namespace"])} for row in rows]


def status_counts(conn: Connection[Any]) -> dict[str, int]:
    """Memories by embedding status in the active space (``text_only`` when there is none)."""
    rows = all_rows(
        conn,
        (
            "SELECT COALESCE(e.status, 'text_only') AS status, count(*) AS n"
            f" FROM helix.memories m{_ACTIVE_EMBEDDING} GROUP BY 1"
        ),
    )
    return {str(row["status"]): int(row["n"]) for row in rows}


# --- embedding spaces ----------------------------------------------------------------------


def vector_available(conn: Connection[Any]) -> bool:
    """Whether this server can hold vectors (pgvector installed, or installable)."""
    return bool(first_value(conn, "SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector')"))


def vector_table(space_id: int) -> str:
    return f"memory_vectors_{int(space_id)}"


def vector_type(dimensions: int) -> str:
    return "halfvec" if dimensions > HALFVEC_ABOVE else "vector"


def vector_literal(vector: list[float]) -> str:
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


def spaces(conn: Connection[Any]) -> list[dict[str, Any]]:
    """Every embedding space, with whether its vector table exists."""
    return all_rows(
        conn,
        (
            "SELECT s.id, s.name, s.model, s.dimensions, s.active, s.created_at,"
            " to_regclass('helix.memory_vectors_' || s.id) IS NOT NULL AS has_vectors"
            " FROM helix.memory_spaces s ORDER BY s.id"
        ),
    )


def space_named(conn: Connection[Any], name: str) -> dict[str, Any] | None:
    return next((s for s in spaces(conn) if s["name"] == name), None)


def active_space(conn: Connection[Any]) -> dict[str, Any] | None:
    return next((s for s in spaces(conn) if s["active"]), None)


def add_space(conn: Connection[Any], name: str, model: str, dimensions: int) -> dict[str, Any]:
    """Create the space (pgvector's extension, its vector table and HNSW index) unless it
    exists, and make every memory pending in it (the backfill); the space."""
    known = space_named(conn, name)
    if known is not None:
        return known
    execute(conn, "CREATE EXTENSION IF NOT EXISTS vector")
    space_id = int(
        first_value(
            conn,
            "INSERT INTO helix.memory_spaces (name, model, dimensions) VALUES (%(n)s, %(m)s, %(d)s) RETURNING id",
            {"n": name, "m": model, "d": dimensions},
        )
    )
    table, kind = vector_table(space_id), vector_type(dimensions)
    execute(
        conn,
        (
            f"CREATE TABLE helix.{table} ("
            " memory_id bigint PRIMARY KEY REFERENCES helix.memories (id) ON DELETE CASCADE,"
            f" content_hash text NOT NULL, embedding {kind}({int(dimensions)}) NOT NULL)"
        ),
    )
    execute(conn, f"CREATE INDEX {table}_hnsw ON helix.{table} USING hnsw (embedding {kind}_cosine_ops)")
    execute(
        conn,
        (
            "INSERT INTO helix.memory_embeddings (memory_id, space_id, content_hash)"
            " SELECT id, %(s)s, content_hash FROM helix.memories"
        ),
        {"s": space_id},
    )
    found = space_named(conn, name)
    assert found is not None
    return found


def activate_space(conn: Connection[Any], name: str) -> bool:
    """Make ``name`` the space vector search uses; False when there is no such space."""
    if space_named(conn, name) is None:
        return False
    execute(conn, "UPDATE helix.memory_spaces SET active = false WHERE active AND name <> %(n)s", {"n": name})
    execute(conn, "UPDATE helix.memory_spaces SET active = true WHERE name = %(n)s", {"n": name})
    return True


def drop_space(conn: Connection[Any], name: str) -> bool:
    """Delete the space, its vectors and embedding states; False when there is none."""
    space = space_named(conn, name)
    if space is None:
        return False
    execute(conn, f"DROP TABLE IF EXISTS helix.{vector_table(space['id'])}")
    execute(conn, "DELETE FROM helix.memory_spaces WHERE id = %(id)s", {"id": space["id"]})
    return True


# --- embedding work ------------------------------------------------------------------------


def pending_embeddings(conn: Connection[Any], limit: int = 500) -> list[dict[str, Any]]:
    """Memories pending in some space: ``memory_id``, ``space_id``, ``content_hash``,
    ``generation``, oldest first."""
    return all_rows(
        conn,
        (
            "SELECT memory_id, space_id, content_hash, generation FROM helix.memory_embeddings"
            " WHERE status = 'pending' ORDER BY updated_at, memory_id LIMIT %(limit)s"
        ),
        {"limit": limit},
    )


def embedding_job(conn: Connection[Any], memory_id: int, space_id: int) -> dict[str, Any] | None:
    """What embedding the memory in the space takes now: its text and hash, the space's
    model and dimensions and the attempts so far; None when there is nothing to do (the
    memory is gone, or its embedding is not pending)."""
    return first_row(
        conn,
        (
            "SELECT m.content AS text, m.content_hash, s.name AS space, s.model, s.dimensions, e.attempts"
            " FROM helix.memory_embeddings e JOIN helix.memories m ON m.id = e.memory_id"
            " JOIN helix.memory_spaces s ON s.id = e.space_id"
            " WHERE e.memory_id = %(m)s AND e.space_id = %(s)s AND e.status = 'pending'"
        ),
        {"m": memory_id, "s": space_id},
    )


def write_vector(conn: Connection[Any], memory_id: int, space_id: int, content_hash: str, vector: list[float]) -> bool:
    """Store the vector computed from the text of hash ``content_hash`` and mark the
    embedding complete, only if the memory still has that text; False otherwise (the
    memory changed or is gone: its new text is pending already)."""
    current = first_value(conn, "SELECT content_hash FROM helix.memories WHERE id = %(m)s FOR UPDATE", {"m": memory_id})
    if current != content_hash:
        return False
    space = next((s for s in spaces(conn) if s["id"] == space_id), None)
    if space is None or not space["has_vectors"]:
        return False
    kind = vector_type(space["dimensions"])
    execute(
        conn,
        (
            f"INSERT INTO helix.{vector_table(space_id)} (memory_id, content_hash, embedding)"
            f" VALUES (%(m)s, %(h)s, CAST(%(v)s AS {kind}))"
            " ON CONFLICT (memory_id) DO UPDATE SET content_hash = EXCLUDED.content_hash, embedding = EXCLUDED.embedding"
        ),
        {"m": memory_id, "h": content_hash, "v": vector_literal(vector)},
    )
    execute(
        conn,
        (
            "UPDATE helix.memory_embeddings SET status = 'complete', attempts = attempts + 1, error = NULL,"
            " updated_at = now() WHERE memory_id = %(m)s AND space_id = %(s)s AND content_hash = %(h)s"
        ),
        {"m": memory_id, "s": space_id, "h": content_hash},
    )
    return True


def count_attempt(conn: Connection[Any], memory_id: int, space_id: int, content_hash: str, error: str) -> None:
    """Record a failed attempt at embedding the text of ``content_hash`` and its error."""
    execute(
        conn,
        (
            "UPDATE helix.memory_embeddings SET attempts = attempts + 1, error = %(err)s, updated_at = now()"
            " WHERE memory_id = %(m)s AND space_id = %(s)s AND content_hash = %(h)s AND status = 'pending'"
        ),
        {"m": memory_id, "s": space_id, "h": content_hash, "err": error[:2000]},
    )


def fail_embedding(conn: Connection[Any], memory_id: int, space_id: int) -> None:
    """End the retries of a pending embedding: ``failed``, with its last error and attempts."""
    execute(
        conn,
        (
            "UPDATE helix.memory_embeddings SET status = 'failed', updated_at = now()"
            " WHERE memory_id = %(m)s AND space_id = %(s)s AND status = 'pending'"
        ),
        {"m": memory_id, "s": space_id},
    )


def retry_failed(conn: Connection[Any], prefix: Namespace = ()) -> int:
    """Make the failed embeddings of memories under ``prefix`` pending again (attempts
    start over); how many."""
    return execute(
        conn,
        (
            "UPDATE helix.memory_embeddings SET status = 'pending', attempts = 0, error = NULL, updated_at = now(),"
            f" generation = generation + 1 WHERE status = 'failed' AND memory_id IN (SELECT m.id FROM helix.memories m WHERE {_PREFIX})"
        ),
        {"prefix": list(prefix)},
    )
