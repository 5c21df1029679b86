"""``helix-dbos memory`` as a real process on a real, migrated database: the mode, list,
search, show, forget, erase (the counts) and retry-failed, and bad input as one error line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from helix_dbos._database import libpq_url
from helix_dbos.memory import MemoryStore

CLI = Path(sys.executable).parent / "helix-dbos"


def cli(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CLI), "memory", *args, "--database-url", url], capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)


@pytest.fixture
def store(migrated_url: str) -> MemoryStore:
    return MemoryStore(migrated_url)


def test_list_search_show_forget(store: MemoryStore, migrated_url: str) -> None:
    tea = store.remember(("user", "u-1"), "drinks green tea", metadata={"topic": "food"})
    store.remember(("user", "u-1"), "prefers Celsius", key="units")
    store.remember(("user", "u-2"), "drinks coffee")

    listed = json.loads(cli(migrated_url, "list", "user/u-1", "--json").stdout)
    assert sorted(m["text"] for m in listed) == ["drinks green tea", "prefers Celsius"]
    found = cli(migrated_url, "search", "user", "tea")
    assert found.returncode == 0 and "drinks green tea" in found.stdout and "coffee" not in found.stdout
    shown = cli(migrated_url, "show", str(tea.id))
    assert shown.returncode == 0 and "memory 1 in user/u-1" in shown.stdout and '"topic": "food"' in shown.stdout
    forgot = cli(migrated_url, "forget", "user/u-1", "--key", "units")
    assert (forgot.returncode, forgot.stdout.strip()) == (0, "forgot key 'units' in user/u-1")
    again = cli(migrated_url, "forget", "user/u-1", "--key", "units")
    assert (again.returncode, again.stderr.strip()) == (1, "error: no such memory in user/u-1")
    overview = cli(migrated_url)
    assert overview.returncode == 0 and "mode: " in overview.stdout and "user/u-1" in overview.stdout


def test_erase_reports_counts_and_leaves_nothing(store: MemoryStore, migrated_url: str) -> None:
    store.remember(("user", "gone"), "likes jazz")
    store.remember(("user", "gone", "work"), "plays jazz at work")
    store.remember(("user", "kept"), "likes jazz")

    erased = cli(migrated_url, "erase", "user/gone", "--yes", "--json")

    assert erased.returncode == 0, erased.stderr
    assert json.loads(erased.stdout)["memories"] == 2
    with psycopg.connect(libpq_url(migrated_url)) as conn:
        left = conn.execute("SELECT namespace FROM helix.memories").fetchall()
    assert left == [(["user", "kept"],)]
    assert "likes jazz" in cli(migrated_url, "search", "", "jazz").stdout


def test_retry_failed_and_bad_input(store: MemoryStore, migrated_url: str) -> None:
    assert cli(migrated_url, "retry-failed").stdout.strip() == "0 failed embeddings are pending again"
    bad = cli(migrated_url, "list", "user//x")
    assert bad.returncode == 1 and bad.stderr.startswith("error: ") and len(bad.stderr.splitlines()) == 1
    missing = cli(migrated_url, "show", "999")
    assert (missing.returncode, missing.stderr.strip()) == (1, "error: no memory 999")
