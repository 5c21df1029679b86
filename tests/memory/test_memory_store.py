"""MemoryStore on a real Postgres: the embedded 18 with pgvector by default, the shared
Postgres 15 without it through HELIX_TEST_DATABASE_URL (text-only memory). Tests of the
vector path skip themselves on a server without pgvector; tests of text-only memory skip
themselves on one with it, so each run checks the mode its server has."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from helix_dbos._database import libpq_url
from helix_dbos._store import memories
from helix_dbos.errors import MemoryInputError, VectorSearchUnavailableError
from helix_dbos.memory import TEXT_ONLY_NOTICE, MemoryStore, MockEmbedder


@pytest.fixture
def store(migrated_url: str) -> Iterator[MemoryStore]:
    instance = MemoryStore(migrated_url, embedder=MockEmbedder(dimensions=32))
    yield instance
    instance.dispose()


def has_pgvector(url: str) -> bool:
    with psycopg.connect(libpq_url(url)) as conn:
        row = conn.execute("SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector')").fetchone()
        return bool(row and row[0])


def count(url: str, sql: str, *params: Any) -> int:
    with psycopg.connect(libpq_url(url)) as conn:
        row = conn.execute(sql, params).fetchone()
        assert row is not None
        return int(row[0])


def embed_all(store: MemoryStore) -> int:
    """Embed every pending memory with the store's embedder, as the queue's step does."""
    done = 0
    with store.pool.connection() as conn, conn.transaction():
        todo = memories.pending_embeddings(conn)
    assert store.embedder is not None
    for job in todo:
        with store.pool.connection() as conn, conn.transaction():
            found = memories.embedding_job(conn, job["memory_id"], job["space_id"])
            assert found is not None
            vector = store.embedder.embed([found["text"]])[0]
            done += memories.write_vector(conn, job["memory_id"], job["space_id"], found["content_hash"], vector)
    return done


def test_a_memory_is_found_by_its_words_as_soon_as_it_is_stored(store: MemoryStore) -> None:
    stored = store.remember(("user", "u-1"), "The user drinks green tea every morning", metadata={"topic": "food"})

    hits = store.search(("user", "u-1"), "what tea does the user like?", mode="text")

    assert [h.memory.id for h in hits] == [stored.id]
    assert hits[0].memory.namespace == ("user", "u-1") and hits[0].memory.metadata == {"topic": "food"}
    assert store.search(("user", "u-1"), "green", filter={"topic": "travel"}, mode="text") == []


def test_an_identical_memory_is_stored_once_also_under_concurrent_writers(store: MemoryStore, migrated_url: str) -> None:
    barrier = threading.Barrier(8)
    ids: list[int] = []

    def write() -> None:
        barrier.wait()
        ids.append(store.remember(("user", "u-2"), "lives in Lyon").id)

    threads = [threading.Thread(target=write) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert len(set(ids)) == 1
    assert count(migrated_url, "SELECT count(*) FROM helix.memories WHERE namespace = %s", ["user", "u-2"]) == 1
    store.remember(("user", "u-3"), "lives in Lyon")  # another namespace: its own row
    assert count(migrated_url, "SELECT count(*) FROM helix.memories") == 2


def test_a_key_is_an_upsert(store: MemoryStore) -> None:
    first = store.remember(("user", "u-4"), "prefers Celsius", key="units")
    second = store.remember(("user", "u-4"), "prefers Fahrenheit", key="units")

    assert second.id == first.id and second.text == "prefers Fahrenheit"
    assert [m.text for m in store.list_memories(("user", "u-4"))] == ["prefers Fahrenheit"]
    assert store.forget(("user", "u-4"), key="units") is True
    assert store.forget(("user", "u-4"), key="units") is False


def test_a_prefix_searches_every_namespace_under_it_and_no_other(store: MemoryStore) -> None:
    store.remember(("user", "a"), "likes sailing")
    store.remember(("user", "b"), "likes sailing boats")
    store.remember(("team", "x"), "likes sailing too")

    assert {h.memory.namespace for h in store.search(("user",), "sailing", mode="text")} == {("user", "a"), ("user", "b")}
    assert {h.memory.namespace for h in store.search(("user", "a"), "sailing", mode="text")} == {("user", "a")}
    assert len(store.search((), "sailing", mode="text")) == 3


def test_an_expired_memory_is_not_found(store: MemoryStore, migrated_url: str) -> None:
    gone = store.remember(("user", "u-5"), "has a cold this week", expires_in=60)
    with psycopg.connect(libpq_url(migrated_url)) as conn:
        conn.execute("UPDATE helix.memories SET expires_at = now() - interval '1 second' WHERE id = %s", (gone.id,))

    assert store.search(("user", "u-5"), "cold", mode="text") == []
    assert store.delete_expired() == 1


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda s: s.remember("user", "x"), "tuple of strings"),
        (lambda s: s.remember((), "x"), "at least one part"),
        (lambda s: s.remember(("user", ""), "x"), "non-empty string"),
        (lambda s: s.remember(("u",), "   "), "non-empty string"),
        (lambda s: s.remember(("u",), "a\x00b"), "NUL"),
        (lambda s: s.remember(("u",), "x" * 40_000), "at most 32000"),
        (lambda s: s.remember(("u",), "x", metadata=["no"]), "JSON object"),
        (lambda s: s.remember(("u",), "x", expires_in=-1), "positive number"),
        (lambda s: s.search(("u",), "x", limit=0), "limit"),
        (lambda s: s.search(("u",), "x", mode="fuzzy"), "mode"),
        (lambda s: s.forget(("u",)), "exactly one"),
        (lambda s: s.list_memories(("u",), status="done"), "status"),
    ],
)
def test_bad_input_is_refused_and_nothing_is_written(
    store: MemoryStore, migrated_url: str, call: Any, message: str
) -> None:
    with pytest.raises(MemoryInputError, match=message):
        call(store)
    assert count(migrated_url, "SELECT count(*) FROM helix.memories") == 0


def test_erase_leaves_no_row_vector_or_search_hit(store: MemoryStore, migrated_url: str) -> None:
    vectors = has_pgvector(migrated_url)
    if vectors:
        store.add_space()
    store.remember(("user", "gone"), "likes jazz")
    store.remember(("user", "gone", "work"), "works on jazz festivals")
    kept = store.remember(("user", "kept"), "likes jazz")
    if vectors:
        assert embed_all(store) == 3

    counts = store.erase(("user", "gone"))

    assert counts == {"memories": 2, "vectors": 2 if vectors else 0, "embeddings": 2 if vectors else 0}
    assert [h.memory.id for h in store.search(("user",), "jazz", mode="text")] == [kept.id]
    assert count(migrated_url, "SELECT count(*) FROM helix.memories WHERE namespace[2] = 'gone'") == 0
    if vectors:
        assert [h.memory.id for h in store.search(("user",), "jazz", mode="vector")] == [kept.id]
        assert count(migrated_url, "SELECT count(*) FROM helix.memory_vectors_1") == 1
        assert count(migrated_url, "SELECT count(*) FROM helix.memory_embeddings") == 1


# --- with pgvector -------------------------------------------------------------------------


def test_memories_are_pending_then_complete_and_found_by_meaning(store: MemoryStore, migrated_url: str) -> None:
    if not has_pgvector(migrated_url):
        pytest.skip("this Postgres has no pgvector (text-only memory is tested here instead)")
    space = store.add_space()
    tea = store.remember(("user", "v"), "drinks green tea")
    store.remember(("user", "v"), "owns a red bicycle")
    assert store.get(tea.id).embedding == "pending"  # type: ignore[union-attr]
    assert store.search(("user", "v"), "tea", mode="hybrid")[0].memory.id == tea.id  # found by its words, pending

    assert embed_all(store) == 2

    assert store.get(tea.id).embedding == "complete"  # type: ignore[union-attr]
    hits = store.search(("user", "v"), "green tea", mode="vector")
    assert hits[0].memory.id == tea.id and hits[0].vector_rank == 1
    hybrid = store.search(("user", "v"), "green tea", mode="hybrid")
    assert hybrid[0].memory.id == tea.id and hybrid[0].text_rank == 1 and hybrid[0].vector_rank == 1
    assert hybrid[0].score == pytest.approx(2 / 61)
    assert space["name"] == "mock-embedder@32"
    assert store.status()["counts"] == {"complete": 2}


def test_a_vector_never_lands_on_text_that_changed(store: MemoryStore, migrated_url: str) -> None:
    if not has_pgvector(migrated_url):
        pytest.skip("this Postgres has no pgvector")
    space = store.add_space()
    memory = store.remember(("user", "w"), "likes cats", key="pet")
    with store.pool.connection() as conn, conn.transaction():
        job = memories.embedding_job(conn, memory.id, space["id"])
    assert job is not None
    store.remember(("user", "w"), "likes dogs", key="pet")  # changed while the provider worked

    with store.pool.connection() as conn, conn.transaction():
        assert memories.write_vector(conn, memory.id, space["id"], job["content_hash"], [0.1] * 32) is False
    assert store.get(memory.id).embedding == "pending"  # type: ignore[union-attr]
    assert embed_all(store) == 1
    assert store.search(("user", "w"), "dogs", mode="vector")[0].memory.text == "likes dogs"


def test_a_model_switch_keeps_search_answering(store: MemoryStore, migrated_url: str) -> None:
    if not has_pgvector(migrated_url):
        pytest.skip("this Postgres has no pgvector")
    store.add_space()
    for text in ("drinks green tea", "rides a bicycle", "reads novels"):
        store.remember(("user", "s"), text)
    embed_all(store)
    wide = MockEmbedder(dimensions=2048, model="mock-wide")  # above 2,000: halfvec

    new = store.add_space(wide)  # backfill: every memory pending in the new space
    assert not new["active"]
    assert store.search(("user", "s"), "tea", mode="vector")[0].memory.text == "drinks green tea"
    store.embedder = wide
    assert store.search(("user", "s"), "tea", mode="hybrid")[0].memory.text == "drinks green tea"  # old space active
    store.embedder = MockEmbedder(dimensions=32)
    with store.pool.connection() as conn, conn.transaction():
        for job in memories.pending_embeddings(conn):
            found = memories.embedding_job(conn, job["memory_id"], job["space_id"])
            assert found is not None
            memories.write_vector(conn, job["memory_id"], job["space_id"], found["content_hash"], wide.embed([found["text"]])[0])
    store.activate_space(new["name"])
    store.embedder = wide
    assert store.search(("user", "s"), "tea", mode="vector")[0].memory.text == "drinks green tea"
    store.drop_space("mock-embedder@32")
    assert [s["name"] for s in store.status()["spaces"]] == ["mock-wide@2048"]
    assert store.search(("user", "s"), "tea", mode="hybrid")[0].memory.text == "drinks green tea"
    with psycopg.connect(libpq_url(migrated_url)) as conn:
        kind = conn.execute("SELECT format_type(atttypid, atttypmod) FROM pg_attribute"
                            " WHERE attrelid = 'helix.memory_vectors_2'::regclass AND attname = 'embedding'").fetchone()
    assert kind == ("halfvec(2048)",)


# --- without pgvector ----------------------------------------------------------------------


def test_text_only_memory_says_so_in_one_line(store: MemoryStore, migrated_url: str) -> None:
    if has_pgvector(migrated_url):
        pytest.skip("this Postgres has pgvector (the vector path is tested here instead)")
    store.remember(("user", "t"), "drinks green tea")

    with pytest.raises(VectorSearchUnavailableError) as refused:
        store.add_space()
    assert str(refused.value) == TEXT_ONLY_NOTICE
    with pytest.raises(VectorSearchUnavailableError, match="text only"):
        store.search(("user", "t"), "tea", mode="vector")
    assert [h.memory.text for h in store.search(("user", "t"), "tea")] == ["drinks green tea"]  # hybrid: text
    assert store.status()["mode"] == "text-only"
    assert store.get(store.search(("user", "t"), "tea")[0].memory.id).embedding is None  # type: ignore[union-attr]
