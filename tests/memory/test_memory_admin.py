"""Agent memory through the operator API (``helix_dbos.admin``), on a real Postgres:
the one-shot functions, their async twins and both clients, on memories another process
stored, with nothing but the database URL."""

from __future__ import annotations

import asyncio

import pytest

from helix_dbos import admin
from helix_dbos.errors import MemoryInputError
from helix_dbos.memory import MemoryStore


@pytest.fixture
def stored(migrated_url: str) -> dict[str, int]:
    store = MemoryStore(migrated_url)
    try:
        return {
            "ana": store.remember(("user", "ana"), "Ana prefers window seats on trains").id,
            "ana_key": store.remember(("user", "ana"), "Ana lives in Lisbon", key="home").id,
            "bob": store.remember(("user", "bob"), "Bob prefers aisle seats on planes").id,
        }
    finally:
        store.dispose()


def test_the_one_shot_functions_list_search_show_forget_and_erase(migrated_url: str, stored: dict[str, int]) -> None:
    listed = admin.list_memories(migrated_url, ("user", "ana"))
    assert sorted(m.id for m in listed) == sorted([stored["ana"], stored["ana_key"]])
    hits = admin.search_memories(migrated_url, ("user",), "window seats", mode="text")
    assert [hit.memory.id for hit in hits][:1] == [stored["ana"]]
    shown = admin.get_memory(migrated_url, stored["bob"])
    assert shown is not None and shown.namespace == ("user", "bob") and shown.text.startswith("Bob")
    assert admin.get_memory(migrated_url, 10**12) is None

    assert admin.forget_memory(migrated_url, ("user", "ana"), key="home") is True
    assert admin.forget_memory(migrated_url, ("user", "ana"), key="home") is False
    with pytest.raises(MemoryInputError):
        admin.forget_memory(migrated_url, ("user", "ana"))  # neither a key nor an id: nothing goes
    assert [m.id for m in admin.list_memories(migrated_url, ("user", "ana"))] == [stored["ana"]]

    erased = admin.erase_memories(migrated_url, ("user", "ana"))
    assert erased["memories"] == 1
    assert admin.list_memories(migrated_url, ("user", "ana")) == []
    assert admin.search_memories(migrated_url, ("user",), "window", mode="text") == []
    assert [m.id for m in admin.list_memories(migrated_url, ("user",))] == [stored["bob"]]  # Bob's stay
    assert admin.retry_failed_memories(migrated_url) == 0  # nothing failed


def test_the_async_twins_and_the_clients_answer_the_same(migrated_url: str, stored: dict[str, int]) -> None:
    async def both() -> tuple[list[int], list[int], int | None]:
        listed = await admin.list_memories_async(migrated_url, ("user",))
        async with admin.AsyncAdminClient(migrated_url) as client:
            hits = await client.search_memories(("user",), "aisle seats", 5, "text")
            shown = await client.get_memory(stored["bob"])
        return [m.id for m in listed], [h.memory.id for h in hits], shown.id if shown else None

    listed, hits, shown = asyncio.run(both())
    with admin.AdminClient(migrated_url) as client:
        assert sorted(listed) == sorted(m.id for m in client.list_memories(("user",)))
    assert sorted(listed) == sorted(stored.values())
    assert hits[:1] == [stored["bob"]] and shown == stored["bob"]
    assert asyncio.run(admin.erase_memories_async(migrated_url, ("user",)))["memories"] == 3
