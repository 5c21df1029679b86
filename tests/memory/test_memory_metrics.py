"""The memory gauges of the fleet metrics: memories by embedding status, read from a real database."""

from __future__ import annotations

from helix_dbos.memory import MemoryStore
from helix_dbos.observability.fleet import FleetReader, samples


def test_memories_by_status_are_gauges(migrated_url: str) -> None:
    store = MemoryStore(migrated_url)
    store.remember(("user", "a"), "likes tea")
    store.remember(("user", "b"), "likes coffee")

    gauges = {labels["status"]: value for name, _, labels, value in samples(FleetReader(migrated_url).read())
              if name == "helix_memories"}

    assert gauges == {"pending": 0, "complete": 0, "failed": 0, "text_only": 2}
    store.dispose()
