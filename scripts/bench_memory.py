"""Benchmark: agent memory at 100,000 memories.

    python scripts/bench_memory.py [--memories 100000] [--server-url URL]

On a new database of the server (``--server-url``, else ``$HELIX_TEST_DATABASE_URL``, else
the embedded Postgres 18 in ``.helix/bench-pgdata``), with the deterministic
``MockEmbedder`` (64 dimensions; no provider, so the figures are the database's and
helix's, not a model's):

- ``remember`` inside a step: what applying one memory write adds to a step's commit
  transaction (p50/p99 of the transaction with the write minus without);
- text, vector and hybrid search p50/p99 (200 queries, limit 10) over the 100,000;
- embedding throughput through the durable queue: 1,000 new memories embedded by the
  DBOS workflows of an ``EmbeddingWorker``.

Vector and hybrid search and the queue need pgvector; on a Postgres without it they are
reported as not available. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy.engine import make_url

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from conftest import create_database, drop_database  # noqa: E402

from helix_dbos._database import libpq_url, start_embedded, validate_url  # noqa: E402
from helix_dbos._store import memories  # noqa: E402
from helix_dbos._store.memory_records import MemoryWrite  # noqa: E402
from helix_dbos._store.migrations import migrate  # noqa: E402
from helix_dbos._store.pools import Pool  # noqa: E402
from helix_dbos.memory import MemoryStore, MockEmbedder  # noqa: E402

WORDS = ("tea coffee sailing jazz bicycle Lyon Paris metric units allergy peanuts novel garden dog cat "
         "morning evening budget invoice refund travel train flight hotel meeting deadline report python "
         "postgres durable agent memory search vector keyword weather rain summer winter music piano").split()
QUERIES = 200
QUEUE_MEMORIES = 1_000


def text(rng: random.Random) -> str:
    return "the user " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 12)))


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"p50_ms": round(statistics.median(ordered) * 1000, 3),
            "p99_ms": round(ordered[int(len(ordered) * 0.99) - 1] * 1000, 3)}


def fill(url: str, count: int, embedder: MockEmbedder, vectors: bool) -> float:
    """``count`` memories in 1,000 namespaces (and their vectors); seconds taken."""
    rng = random.Random(7)
    started = time.perf_counter()
    rows = [(["user", f"u-{i % 1000}"], text(rng)) for i in range(count)]
    with psycopg.connect(libpq_url(url)) as conn:
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO helix.memories (namespace, content, content_hash) VALUES (%s, %s, encode(sha256(convert_to(%s, 'UTF8')), 'hex'))"
                " ON CONFLICT DO NOTHING",
                [(ns, t, t) for ns, t in rows],
            )
        if vectors:
            found = conn.execute("SELECT id, content, content_hash FROM helix.memories").fetchall()
            literal = memories.vector_literal
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO helix.memory_vectors_1 (memory_id, content_hash, embedding) VALUES (%s, %s, %s::vector)",
                    [(i, h, literal(v)) for (i, _, h), v in zip(found, embedder.embed([t for _, t, _ in found]))],
                )
            conn.execute("INSERT INTO helix.memory_embeddings (memory_id, space_id, content_hash, status)"
                         " SELECT id, 1, content_hash, 'complete' FROM helix.memories")
        conn.execute("ANALYZE helix.memories")
    return time.perf_counter() - started


def commit_cost(pool: Pool, rounds: int = 300) -> dict[str, float]:
    """The step-commit transaction's time with one memory write, minus without."""
    rng = random.Random(11)
    bare, with_memory = [], []
    for i in range(rounds):
        started = time.perf_counter()
        with pool.connection() as conn, conn.transaction():
            conn.execute("SELECT 1")
        bare.append(time.perf_counter() - started)
        write = MemoryWrite.remember(("user", f"u-{i % 1000}"), text(rng) + f" #{i}")
        started = time.perf_counter()
        with pool.connection() as conn, conn.transaction():
            conn.execute("SELECT 1")
            memories.apply_writes(conn, [write], "bench", 1, 1)
        with_memory.append(time.perf_counter() - started)
    extra = [w - b for w, b in zip(sorted(with_memory), sorted(bare))]
    return {**percentiles([max(e, 0.0) for e in extra]), "transaction_p50_ms": percentiles(with_memory)["p50_ms"]}


def search_latency(store: MemoryStore, mode: str) -> dict[str, float]:
    rng = random.Random(13)
    samples = []
    for _ in range(QUERIES):
        prefix = ("user", f"u-{rng.randrange(1000)}") if rng.random() < 0.5 else ("user",)
        query = " ".join(rng.choice(WORDS) for _ in range(3))
        started = time.perf_counter()
        store.search(prefix, query, limit=10, mode=mode)  # type: ignore[arg-type]
        samples.append(time.perf_counter() - started)
    return percentiles(samples)


def queue_throughput(url: str, embedder: MockEmbedder) -> dict[str, float]:
    from helix_dbos import MockLLMAdapter, launch_standalone, shutdown
    from helix_dbos.memory.embedding import EmbeddingWorker

    worker = EmbeddingWorker(url, [embedder], poll_seconds=0.2)
    launch_standalone(MockLLMAdapter(), agents=[], database_url=url, executor_id="bench-memory")
    store = MemoryStore(url, embedder=embedder)
    rng = random.Random(17)
    for i in range(QUEUE_MEMORIES):
        store.remember(("queue", f"q-{i % 10}"), text(rng) + f" #{i}")
    started = time.perf_counter()
    worker.start()
    while store.status()["counts"].get("pending"):
        time.sleep(0.05)
    seconds = time.perf_counter() - started
    worker.stop()
    shutdown()
    return {"memories": QUEUE_MEMORIES, "seconds": round(seconds, 2), "per_second": round(QUEUE_MEMORIES / seconds, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--server-url", default=os.environ.get("HELIX_TEST_DATABASE_URL"))
    args = parser.parse_args()
    server = validate_url(args.server_url) if args.server_url else start_embedded(REPO / ".helix" / "bench-pgdata")
    url = create_database(server)
    try:
        migrate(url)
        embedder = MockEmbedder(dimensions=64)
        store = MemoryStore(url, embedder=embedder)
        vectors = store.status()["mode"] == "vector"
        if vectors:
            store.add_space()
        figures: dict[str, Any] = {"memories": args.memories, "mode": store.status()["mode"]}
        figures["fill_seconds"] = round(fill(url, args.memories, embedder, vectors), 1)
        figures["remember_in_step_commit"] = commit_cost(store.pool)
        figures["search_text"] = search_latency(store, "text")
        figures["search_vector"] = search_latency(store, "vector") if vectors else "not available (no pgvector)"
        figures["search_hybrid"] = search_latency(store, "hybrid") if vectors else "text search (no pgvector)"
        figures["embedding_queue"] = queue_throughput(url, embedder) if vectors else "not available (no pgvector)"
        store.dispose()
        print(json.dumps(figures, indent=2))
    finally:
        drop_database(server, str(make_url(url).database))


if __name__ == "__main__":
    main()
