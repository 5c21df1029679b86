"""Crash tests for what hooks write: SIGKILL a worker between a step's hooks and their
follow-up save, inside that save, and after it; a relaunched worker recovers the run.

Every post-commit hook kind of ``hook_worker.py`` counts in the state, so a hook write
applied twice or lost shows in the counters. The recovered session must equal an
uninterrupted run's: the same state, patch log (step, part, patch) and stream.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psycopg
import pytest

from helix_dbos._database import libpq_url

from crash_kit import finish, kill_when, migrated_database, start_worker  # type: ignore[import-not-found]

WORKER = Path(__file__).with_name("hook_worker.py")
SESSION = "hook-crash-session"
STEPS = 3  # hook_worker.STEPS: tool steps, then a text step
FINAL_STATE = {"notes": [1, 2, 3], "messages": 2 * STEPS + 1, "tools": STEPS, "steps": STEPS + 1, "done": True}

KillPoint = Callable[[psycopg.Connection, Path], bool]

SLOW_SAVE_TRIGGER = """
CREATE FUNCTION helix.test_slow_save() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_sleep(0.4);
    RETURN NEW;
END $$;
CREATE TRIGGER test_slow_save BEFORE INSERT ON helix.state_patches
    FOR EACH ROW WHEN (NEW.part = 1) EXECUTE FUNCTION helix.test_slow_save();
"""


def hooks_ran(step: int) -> KillPoint:
    """Kill after the step's hooks wrote, before their save (on_step_finish sleeps then)."""
    return lambda conn, marks: (marks / f"hooked_{step}").exists()


def in_save(step: int) -> KillPoint:
    """Kill while the step's follow-up save is running (made slow by a trigger)."""

    def ready(conn: psycopg.Connection, marks: Path) -> bool:
        if not (marks / f"hooked_{step}").exists():
            return False
        running = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND state = 'active' AND query LIKE %s",
            ("%helix.insert_state_patch(%",),
        ).fetchone()
        return running is not None and running[0] > 0

    return ready


def saved(step: int) -> KillPoint:
    """Kill as soon as the step's follow-up save is committed."""

    def ready(conn: psycopg.Connection, marks: Path) -> bool:
        row = conn.execute(
            "SELECT 1 FROM helix.state_patches WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %s) AND step = %s AND part = 1", (SESSION, step)
        ).fetchone()
        return row is not None

    return ready


KILL_POINTS: dict[str, KillPoint] = {
    **{f"hooks-ran-step{k}": hooks_ran(k) for k in range(1, STEPS + 2)},
    **{f"in-save-step{k}": in_save(k) for k in range(1, STEPS + 2)},
    **{f"saved-step{k}": saved(k) for k in range(1, STEPS + 1)},
}


def snapshot(url: str) -> dict[str, Any]:
    """The session as stored: what must match an uninterrupted run."""
    with psycopg.connect(libpq_url(url)) as conn:
        patches = conn.execute(
            "SELECT step, part, patch FROM helix.state_patches WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %s) ORDER BY step, part", (SESSION,)
        ).fetchall()
        events = conn.execute(
            "SELECT seq, step, type, data FROM helix.events WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %s) ORDER BY seq", (SESSION,)
        ).fetchall()
        session = conn.execute(
            "SELECT status, step_count, run_count FROM helix.sessions WHERE id = %s", (SESSION,)
        ).fetchone()
    streamed = [(step, kind, data if kind == "state_patch" else None) for _, step, kind, data in events]
    return {"patches": patches, "events": streamed, "session": session}


@pytest.fixture(scope="module")
def baseline(make_database: Callable[[], str], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    url = migrated_database(make_database, SLOW_SAVE_TRIGGER)
    out = finish(start_worker(WORKER, url, SESSION, "exec-baseline", "start", tmp_path_factory.mktemp("hook-baseline")), timeout=90)
    assert out["result"]["status"] == "completed" and out["state"] == FINAL_STATE
    return snapshot(url)


def crash_and_recover(url: str, name: str, point: KillPoint, marks: Path) -> tuple[dict[str, Any], bool]:
    executor_id = f"exec-{name}"
    proc = start_worker(WORKER, url, SESSION, executor_id, "start", marks)
    killed = kill_when(proc, url, lambda conn: point(conn, marks))
    return finish(start_worker(WORKER, url, SESSION, executor_id, "recover", marks), timeout=90), killed


def test_hook_writes_survive_a_kill_around_their_save_exactly_once(
    make_database: Callable[[], str], baseline: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> None:
    def run(item: tuple[str, KillPoint]) -> tuple[str, dict[str, Any], dict[str, Any], bool]:
        name, point = item
        url = migrated_database(make_database, SLOW_SAVE_TRIGGER)
        out, killed = crash_and_recover(url, name, point, tmp_path_factory.mktemp(name))
        return name, out, snapshot(url), killed

    with ThreadPoolExecutor(max_workers=3) as pool:
        outcomes = list(pool.map(run, KILL_POINTS.items()))

    not_killed = [name for name, _, _, was_killed in outcomes if not was_killed]
    assert not not_killed, f"kill points never reached: {not_killed}"
    for name, out, snap, _ in outcomes:
        assert out["result"]["status"] == "completed", (name, out)
        assert out["state"] == FINAL_STATE, f"{name}: hook writes lost or applied twice"
        for key in ("patches", "events", "session"):
            assert snap[key] == baseline[key], f"{name}: {key} differs from the uninterrupted run"
