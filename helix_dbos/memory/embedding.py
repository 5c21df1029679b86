"""Embeddings as durable queued work: every pending memory is embedded by a DBOS
workflow on the ``helix_memory_embeddings`` queue, so no crash, deploy or provider outage
orphans it.

    from helix_dbos.memory.embedding import EmbeddingWorker

    worker = EmbeddingWorker(database_url, [LiteLLMEmbedder("openai/text-embedding-3-small")])
    DBOS.launch()
    worker.start()          # enqueues pending memories every poll_seconds
    ...
    worker.stop()

The workflow is declared when this module is imported (the executor imports it, before
``DBOS.launch()``); ``start`` registers the queue. Each pending
memory of a space gets one workflow, named by the memory, the space and the embedding's
generation (``helix-embed-<space>-<memory>-<generation>``), so enqueueing it again is a
no-op and a text changed or retried is a new one. Its ``embed`` step calls the space's
embedder, retried with exponential backoff up to ``MAX_ATTEMPTS`` times, each failure
counted with its error on the memory; when the attempts run out the memory is ``failed``
(``MemoryStore.retry_failed`` makes it pending again). The write-back stores the vector only if
the memory still has the text it was computed from. A worker killed mid-workflow is
recovered by DBOS like any other workflow, and the poller re-enqueues whatever it never
reached.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

from dbos import DBOS, Queue, SetWorkflowID

from helix_dbos._error_text import first_line
from helix_dbos._store import memories
from helix_dbos._store.pools import Pool, create_pool
from helix_dbos._store.retry import retry_transient
from helix_dbos.observability import metrics
from helix_dbos.memory.embedders import Embedder, EmbeddingError, checked, space_name

logger = logging.getLogger("helix_dbos")

QUEUE_NAME = "helix_memory_embeddings"
MAX_ATTEMPTS = 5
RETRY_INTERVAL_SECONDS = 1.0
BACKOFF_RATE = 2.0

WORKER_CONCURRENCY = 16
RATE_LIMIT: Any = {"limit": 100, "period": 1.0}
POLLING_INTERVAL_SECONDS = 0.2
"""The embedding queue: 16 workflows at once per process, at most 100 started a second
(across every process), looked for every 0.2 s."""

_pool: Pool | None = None
_embedders: dict[str, Embedder] = {}


def workflow_id(space_id: int, memory_id: int, generation: int) -> str:
    return f"helix-embed-{space_id}-{memory_id}-{generation}"


class EmbeddingWorker:
    """Embeds this database's pending memories with ``embedders`` (one per space, matched
    by ``model@dimensions``) through the durable queue.

    Args:
        database_url: The helix database.
        embedders: The embedders of the spaces this process embeds.
        poll_seconds: How often pending memories are looked for and enqueued.
    """

    def __init__(self, database_url: str, embedders: Sequence[Embedder], *, poll_seconds: float = 1.0) -> None:
        global _pool
        _pool = create_pool(database_url)
        for embedder in embedders:
            _embedders[space_name(embedder)] = embedder
        self.poll_seconds = poll_seconds
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._queue: Queue | None = None

    def start(self) -> None:
        """Register the queue and start enqueueing pending memories (after ``DBOS.launch()``)."""
        self._queue = DBOS.register_queue(
            QUEUE_NAME, worker_concurrency=WORKER_CONCURRENCY, limiter=RATE_LIMIT,
            polling_interval_sec=POLLING_INTERVAL_SECONDS,
        )
        self._stop.clear()
        self._thread = threading.Thread(target=self._poll, name="helix-memory-embeddings", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop enqueueing; queued workflows finish (or recover) as DBOS runs them."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def enqueue_pending(self) -> int:
        """Enqueue one workflow per pending memory and space (a no-op for those queued
        already); how many were looked at."""
        pool, queue = _require_pool(), self._queue
        if queue is None:
            raise EmbeddingError("EmbeddingWorker.start() registers the queue first")

        def read() -> list[dict[str, Any]]:
            with pool.connection() as conn:
                return memories.pending_embeddings(conn)

        todo = retry_transient(read)
        for job in todo:
            with SetWorkflowID(workflow_id(job["space_id"], job["memory_id"], job["generation"])):
                queue.enqueue(embed_memory, job["memory_id"], job["space_id"])
        return len(todo)

    def _poll(self) -> None:
        while not self._stop.is_set():
            try:
                self.enqueue_pending()
            except Exception:  # the next poll tries again; the rows stay pending
                logger.warning("could not enqueue pending memory embeddings", exc_info=True)
            self._stop.wait(self.poll_seconds)


@DBOS.workflow(name="helix_embed_memory")
def embed_memory(memory_id: int, space_id: int) -> str:
    """Embed one memory in one space: ``complete``, ``failed``, ``changed`` (its text
    changed meanwhile: the new text has its own workflow) or ``nothing`` (not pending)."""
    try:
        return str(
            DBOS.run_step(
                {"name": "embed", "retries_allowed": True, "max_attempts": MAX_ATTEMPTS,
                 "interval_seconds": RETRY_INTERVAL_SECONDS, "backoff_rate": BACKOFF_RATE},
                embed_step, memory_id, space_id,
            )
        )
    except Exception:
        DBOS.run_step({"name": "failed"}, mark_failed, memory_id, space_id)
        return "failed"


def embed_step(memory_id: int, space_id: int) -> str:
    """The ``embed`` step: read the job, call the embedder, write the vector back."""
    pool = _require_pool()
    with pool.connection() as conn:
        job = memories.embedding_job(conn, memory_id, space_id)
    if job is None:
        return "nothing"
    embedder = _embedders.get(job["space"])
    started = time.perf_counter()
    try:
        if embedder is None:
            raise EmbeddingError(f"no embedder for the space {job['space']} in this process")
        vector = checked(embedder.embed([job["text"]]), 1, job["dimensions"])[0]
        metrics.embedded(job["model"], time.perf_counter() - started, ok=True)
    except Exception as exc:
        metrics.embedded(job["model"], time.perf_counter() - started, ok=False)
        with pool.connection() as conn, conn.transaction():
            memories.count_attempt(conn, memory_id, space_id, job["content_hash"], first_line(exc))
        raise
    with pool.connection() as conn, conn.transaction():
        written = memories.write_vector(conn, memory_id, space_id, job["content_hash"], vector)
    return "complete" if written else "changed"


def mark_failed(memory_id: int, space_id: int) -> None:
    """The ``failed`` step: the retries ran out (the last error and the attempts stay)."""
    with _require_pool().connection() as conn, conn.transaction():
        memories.fail_embedding(conn, memory_id, space_id)


def _require_pool() -> Pool:
    if _pool is None:
        raise EmbeddingError("no EmbeddingWorker was created in this process before DBOS.launch()")
    return _pool


