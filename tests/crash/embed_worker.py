"""A worker process for the embedding crash test: launches DBOS with an EmbeddingWorker
whose embedder is slow and touches ``embedding`` in ``$HELIX_CRASH_DIR`` while it works
(the test kills the process there), then waits until no memory is pending.

    python embed_worker.py URL _ EXECUTOR_ID start|recover

``start`` remembers ``MEMORIES`` texts first. Prints ``{"statuses": {...}}`` as one JSON line.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from helix_dbos import MockLLMAdapter, launch_standalone, shutdown
from helix_dbos.memory import MemoryStore, MockEmbedder
from helix_dbos.memory.embedding import EmbeddingWorker

MEMORIES = 6


class SlowEmbedder(MockEmbedder):
    def embed(self, texts: list[str]) -> list[list[float]]:
        directory = os.environ.get("HELIX_CRASH_DIR")
        if directory:
            (Path(directory) / "embedding").touch()
        time.sleep(0.3)
        return super().embed(texts)


def main() -> None:
    url, _, executor_id, mode = sys.argv[1:5]
    embedder = SlowEmbedder(dimensions=16)
    worker = EmbeddingWorker(url, [embedder], poll_seconds=0.1)
    launch_standalone(MockLLMAdapter(), agents=[], database_url=url, executor_id=executor_id,
                      notification_listener_polling_interval_sec=0.01)
    store = MemoryStore(url, embedder=embedder)
    if mode == "start":
        store.add_space()
        for i in range(MEMORIES):
            store.remember(("crash", "embed"), f"memory number {i}")
    worker.start()
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and store.status()["counts"].get("pending"):
        time.sleep(0.1)
    worker.stop()
    print(json.dumps({"statuses": store.status()["counts"]}), flush=True)
    shutdown()


if __name__ == "__main__":
    main()
