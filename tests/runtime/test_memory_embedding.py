"""Embeddings as durable queued work, against a real OpenAI-compatible stub on 127.0.0.1
(LiteLLMEmbedder over real HTTP, litellm not mocked) and the session's launched DBOS:
a failing provider leaves memories ``failed`` with the error and the attempts; after
``retry_failed`` they end ``complete``. Needs pgvector (skips itself on a text-only Postgres)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from runtime_testkit import unique, wait_for

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from llm_stub_server import StubLLMServer, StubResponse, openai_error  # noqa: E402

from helix_dbos._store import memories  # noqa: E402
from helix_dbos.memory import LiteLLMEmbedder, MemoryStore  # noqa: E402
from helix_dbos.memory import embedding  # noqa: E402

DIMS = 8


def openai_embedding(vector: list[float]) -> StubResponse:
    return StubResponse(
        {"object": "list", "model": "text-embedding-3-small",
         "data": [{"object": "embedding", "index": 0, "embedding": vector}],
         "usage": {"prompt_tokens": 3, "total_tokens": 3}}
    )


@pytest.fixture
def stub() -> Iterator[StubLLMServer]:
    with StubLLMServer() as server:
        yield server


def test_litellm_embedder_over_real_http(stub: StubLLMServer) -> None:
    stub.add(openai_embedding([0.5] * DIMS))
    embedder = LiteLLMEmbedder("openai/text-embedding-3-small", dimensions=DIMS, api_base=stub.openai_base,
                               api_key="sk-test", max_retries=0)

    assert embedder.embed(["likes tea"]) == [[0.5] * DIMS]
    assert stub.requests[0].path == "/v1/embeddings"
    assert stub.requests[0].body["input"] == ["likes tea"] and stub.requests[0].body["dimensions"] == DIMS


def test_a_failing_provider_leaves_memories_failed_then_retry_failed_completes_them(
    executor: Any, stub: StubLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    with executor.pool.connection() as conn, conn.transaction():
        if not memories.vector_available(conn):
            pytest.skip("this Postgres has no pgvector: memory is text-only")
        # Earlier tests of this process left memories in the session's database: they would
        # be pending in this test's space too and take the stub's scripted answers.
        conn.execute("DELETE FROM helix.memories")
    monkeypatch.setattr(embedding, "RETRY_INTERVAL_SECONDS", 0.05)
    model = "openai/text-embedding-3-small"
    embedder = LiteLLMEmbedder(model, dimensions=DIMS, api_base=stub.openai_base, api_key="sk-test", max_retries=0)  # litellm makes 0 its default (2)
    store = MemoryStore(pool=executor.pool, embedder=embedder)
    space = store.add_space(embedder, activate=True)
    namespace = ("test", unique("emb"))
    # Each attempt is one embed call, which litellm's OpenAI client makes up to 3 times itself.
    stub.add(*[openai_error(503, "provider down") for _ in range(3 * embedding.MAX_ATTEMPTS)])
    memory = store.remember(namespace, "drinks green tea")
    worker = embedding.EmbeddingWorker(executor.database_url, [embedder], poll_seconds=0.2)
    worker.start()
    try:
        failed = wait_for(lambda: (m := store.get(memory.id)) and m.embedding == "failed" and m, timeout=30,
                          what="the memory failed")
        assert failed.embedding_attempts == embedding.MAX_ATTEMPTS
        assert "provider down" in (failed.embedding_error or "")
        assert len(stub.requests) == 3 * embedding.MAX_ATTEMPTS
        assert [m.id for m in store.list_memories(namespace, status="failed")] == [memory.id]
        assert store.search(namespace, "tea")[0].memory.id == memory.id  # still found by its words

        stub.add(openai_embedding([0.25] * DIMS))
        assert store.retry_failed(namespace) == 1
        done = wait_for(lambda: (m := store.get(memory.id)) and m.embedding == "complete" and m, timeout=30,
                        what="the memory complete")
        assert done.embedding_error is None
        stub.add(openai_embedding([0.25] * DIMS))  # the query's embedding
        assert store.search(namespace, "tea", mode="vector")[0].memory.id == memory.id
    finally:
        worker.stop()
        store.activate_space(space["name"])
        with executor.pool.connection() as conn, conn.transaction():
            memories.drop_space(conn, space["name"])


def test_a_model_switch_through_the_queue_keeps_search_answering(executor: Any) -> None:
    import threading

    from helix_dbos.memory import MockEmbedder

    with executor.pool.connection() as conn, conn.transaction():
        if not memories.vector_available(conn):
            pytest.skip("this Postgres has no pgvector: memory is text-only")
        conn.execute("DELETE FROM helix.memories")
    old, new = MockEmbedder(dimensions=16, model="mock-old"), MockEmbedder(dimensions=2100, model="mock-new")
    store = MemoryStore(pool=executor.pool, embedder=old)
    first = store.add_space(old, activate=True)
    namespace = ("test", unique("switch"))
    for i in range(20):
        store.remember(namespace, f"memory {i} about topic{i}")
    store.remember(namespace, "drinks green tea")
    worker = embedding.EmbeddingWorker(executor.database_url, [old, new], poll_seconds=0.1)
    answers: list[list[str]] = []
    stop = threading.Event()

    def keep_searching() -> None:  # an app still on the old model: hybrid, text once the new space is active
        searcher = MemoryStore(pool=executor.pool, embedder=old)
        while not stop.is_set():
            answers.append([h.memory.text for h in searcher.search(namespace, "green tea", limit=1)])

    searching = threading.Thread(target=keep_searching)
    worker.start()
    searching.start()
    try:
        wait_for(lambda: not store.status()["counts"].get("pending"), timeout=60, what="the old space embedded")
        second = store.add_space(new)  # the backfill: every memory pending in the new space, through the queue

        def backfilled() -> bool:
            with executor.pool.connection() as conn, conn.transaction():
                return not memories.pending_embeddings(conn)

        wait_for(backfilled, timeout=60, what="the new space backfilled")
        store.activate_space(second["name"])
        store.embedder = new
        assert store.search(namespace, "green tea", mode="vector", limit=1)[0].memory.text == "drinks green tea"
        store.drop_space(first["name"])
    finally:
        stop.set()
        searching.join()
        worker.stop()
        with executor.pool.connection() as conn, conn.transaction():
            for space in memories.spaces(conn):
                conn.execute("UPDATE helix.memory_spaces SET active = false")
                memories.drop_space(conn, space["name"])
    assert answers and all(a == ["drinks green tea"] for a in answers), [a for a in answers if a != ["drinks green tea"]][:3]
