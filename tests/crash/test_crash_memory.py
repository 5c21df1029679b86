"""Memory under SIGKILL of a real worker process:

- killed after a tool's ``ctx.memory.remember`` and before its step's commit (in the
  tool, once the tool step is checkpointed, inside the commit transaction, right after
  it): after recovery each memory exists exactly once, written by its step;
- killed while the embedding workflow runs: after relaunch every memory ends
  ``complete`` with no manual step (needs pgvector: skips itself on a text-only Postgres).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psycopg
import pytest

from helix_dbos._database import libpq_url

from crash_kit import SLOW_COMMIT_TRIGGER, finish, kill_when, migrated_database, start_worker  # type: ignore[import-not-found]

MEMORY_WORKER = Path(__file__).with_name("memory_worker.py")
EMBED_WORKER = Path(__file__).with_name("embed_worker.py")
SESSION = "memory-crash"

KillPoint = Callable[[psycopg.Connection, Path], bool]


def remembered(step: int) -> KillPoint:
    return lambda conn, marks: (marks / f"remembered_{step}").exists()


def tool_checkpointed(step: int) -> KillPoint:
    def ready(conn: psycopg.Connection, marks: Path) -> bool:
        if conn.execute("SELECT to_regclass('dbos.operation_outputs')").fetchone() == (None,):
            return False
        row = conn.execute(
            "SELECT count(*) FROM dbos.operation_outputs WHERE workflow_uuid = %s AND function_name = 'tool:note'",
            (f"helix:{SESSION}:run:1",),
        ).fetchone()
        return row is not None and row[0] >= step

    return ready


def in_commit(step: int) -> KillPoint:
    def ready(conn: psycopg.Connection, marks: Path) -> bool:
        count = conn.execute("SELECT step_count FROM helix.sessions WHERE id = %s", (SESSION,)).fetchone()
        if count is None or count[0] != step - 1:
            return False
        running = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND state = 'active'"
            " AND query LIKE %s", ("%helix.commit_step%",),
        ).fetchone()
        return running is not None and running[0] > 0

    return ready


def committed(step: int) -> KillPoint:
    def ready(conn: psycopg.Connection, marks: Path) -> bool:
        count = conn.execute("SELECT step_count FROM helix.sessions WHERE id = %s", (SESSION,)).fetchone()
        return count is not None and count[0] == step

    return ready


KILL_POINTS: dict[str, KillPoint] = {
    **{f"remembered-step{k}": remembered(k) for k in (1, 2, 3)},
    **{f"tool-checkpointed-step{k}": tool_checkpointed(k) for k in (1, 3)},
    **{f"in-commit-step{k}": in_commit(k) for k in (1, 2, 3)},
    "committed-step2": committed(2),
}


def kill_at(worker: Path, url: str, session: str, executor_id: str, point: KillPoint, marks: Path) -> bool:
    proc = start_worker(worker, url, session, executor_id, "start", marks)
    return kill_when(proc, url, lambda conn: point(conn, marks))


def memory_rows(url: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(libpq_url(url)) as conn:
        return conn.execute(
            "SELECT content, key, session_id, step, tool_call_id FROM helix.memories ORDER BY content"
        ).fetchall()


EXPECTED = [
    ("count 3", "counter", SESSION, 3, "n3"),
    ("fact 1", None, SESSION, 1, "n1"),
    ("fact 2", None, SESSION, 2, "n2"),
    ("fact 3", None, SESSION, 3, "n3"),
]


def test_a_memory_remembered_before_a_kill_exists_exactly_once_after_recovery(
    make_database: Callable[[], str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    def run(item: tuple[str, KillPoint]) -> tuple[str, bool, dict[str, Any], list[tuple[Any, ...]]]:
        name, point = item
        url = migrated_database(make_database, SLOW_COMMIT_TRIGGER)
        marks = tmp_path_factory.mktemp(name)
        killed = kill_at(MEMORY_WORKER, url, SESSION, f"exec-{name}", point, marks)
        result = finish(start_worker(MEMORY_WORKER, url, SESSION, f"exec-{name}", "recover", marks))
        return name, killed, result, memory_rows(url)

    with ThreadPoolExecutor(max_workers=3) as pool:
        outcomes = list(pool.map(run, KILL_POINTS.items()))

    killed = [name for name, was_killed, _, _ in outcomes if was_killed]
    assert len(killed) >= len(KILL_POINTS) - 2, f"only {killed} were reached"
    for name, _, result, rows in outcomes:
        assert result["status"] == "completed", (name, result)
        assert rows == EXPECTED, name


def test_a_kill_while_embedding_leaves_every_memory_complete_after_relaunch(
    make_database: Callable[[], str], tmp_path: Path
) -> None:
    url = migrated_database(make_database, "SELECT 1")
    with psycopg.connect(libpq_url(url)) as conn:
        available = conn.execute("SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector')").fetchone()
    if not available or not available[0]:
        pytest.skip("this Postgres has no pgvector: memory is text-only")

    killed = kill_at(EMBED_WORKER, url, "-", "exec-embed", lambda conn, marks: (marks / "embedding").exists(), tmp_path)
    assert killed, "the worker finished before it was killed"
    with psycopg.connect(libpq_url(url)) as conn:
        pending = conn.execute("SELECT count(*) FROM helix.memory_embeddings WHERE status = 'pending'").fetchone()
    assert pending is not None and pending[0] > 0  # the kill left work undone

    result = finish(start_worker(EMBED_WORKER, url, "-", "exec-embed", "recover", tmp_path), timeout=120)

    assert result["statuses"] == {"complete": 6}
    with psycopg.connect(libpq_url(url)) as conn:
        vectors = conn.execute("SELECT count(*) FROM helix.memory_vectors_1").fetchone()
    assert vectors == (6,)
