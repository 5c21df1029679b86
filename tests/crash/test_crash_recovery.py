"""Crash tests: SIGKILL a real worker process mid-run, relaunch it, compare the outcome.

Each case starts ``crash_worker.py`` on its own session and executor id, waits for a
kill point, sends SIGKILL, then starts a second worker with the same executor id. DBOS
recovers the PENDING run at launch; the run must then end exactly as an uninterrupted
run does: same transcript, state, step count and usage, nothing duplicated, every tool
call paired with its result.

Kill points (27): at timed offsets after the run starts; inside a tool (a marker file
the tool touches); after a step's tool checkpoints exist but before its commit is
durable; inside the commit transaction (a test trigger makes it slow, and the worker is
killed while pg_stat_activity shows it running); and after a commit, before the next
model call is checkpointed (the commit is replayed and must write nothing).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psycopg
import pytest

from helix_dbos._database import libpq_url
from helix_dbos.orchestration import unpaired_tool_call_ids
from helix_dbos.types import MessageAdapter

from crash_kit import SLOW_COMMIT_TRIGGER, finish, kill_when, migrated_database, start_worker  # type: ignore[import-not-found]

WORKER = Path(__file__).with_name("crash_worker.py")
STEPS = 5

KillPoint = Callable[[psycopg.Connection, str, Path], bool]


def timed(seconds: float) -> KillPoint:
    """Kill ``seconds`` after the run's first event is committed."""
    state: dict[str, float] = {}

    def ready(conn: psycopg.Connection, session_id: str, marks: Path) -> bool:
        if "t0" not in state:
            row = conn.execute("SELECT 1 FROM helix.events WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %s)", (session_id,)).fetchone()
            if row is None:
                return False
            state["t0"] = time.monotonic()
        return time.monotonic() - state["t0"] >= seconds

    return ready


def in_tool(step: int) -> KillPoint:
    """Kill while the first tool of ``step`` runs."""

    def ready(conn: psycopg.Connection, session_id: str, marks: Path) -> bool:
        return (marks / f"in_tool_{step}_a").exists()

    return ready


def tools_checkpointed(step: int) -> KillPoint:
    """Kill once both tool steps of ``step`` are checkpointed and the step is not committed."""

    def ready(conn: psycopg.Connection, session_id: str, marks: Path) -> bool:
        if conn.execute("SELECT to_regclass('dbos.operation_outputs')").fetchone() == (None,):
            return False  # DBOS has not created its tables yet
        row = conn.execute(
            "SELECT count(*) FROM dbos.operation_outputs o WHERE o.workflow_uuid = %s AND o.function_name = 'tool:record'",
            (f"helix:{session_id}:run:1",),
        ).fetchone()
        return row is not None and row[0] >= 2 * step

    return ready


def in_commit(step: int) -> KillPoint:
    """Kill while the commit transaction of ``step`` is running (made slow by a trigger)."""

    def ready(conn: psycopg.Connection, session_id: str, marks: Path) -> bool:
        count = conn.execute("SELECT step_count FROM helix.sessions WHERE id = %s", (session_id,)).fetchone()
        if count is None or count[0] != step - 1:
            return False
        running = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND state = 'active' AND query LIKE %s",
            ("%helix.commit_step%",),
        ).fetchone()
        return running is not None and running[0] > 0

    return ready


def committed(step: int) -> KillPoint:
    """Kill once ``step`` is committed and before the next step's model call is checkpointed:
    the commit is a plain transaction (no DBOS checkpoint of its own), so the recovered run
    replays it, and it must recognize the step and write nothing."""

    def ready(conn: psycopg.Connection, session_id: str, marks: Path) -> bool:
        count = conn.execute("SELECT step_count FROM helix.sessions WHERE id = %s", (session_id,)).fetchone()
        if count is None or count[0] != step:
            return False
        llm = conn.execute(
            "SELECT count(*) FROM dbos.operation_outputs WHERE workflow_uuid = %s AND function_name = 'llm'",
            (f"helix:{session_id}:run:1",),
        ).fetchone()
        return llm is not None and llm[0] == step

    return ready


KILL_POINTS: dict[str, KillPoint] = {
    **{f"timed-{int(s * 1000)}ms": timed(s) for s in (0.0, 0.04, 0.09, 0.14, 0.2, 0.26, 0.33, 0.4, 0.5, 0.62)},
    **{f"in-tool-step{k}": in_tool(k) for k in range(1, STEPS + 1)},
    **{f"tools-done-step{k}": tools_checkpointed(k) for k in (1, 3, 5)},
    **{f"in-commit-step{k}": in_commit(k) for k in range(1, STEPS + 1)},
    **{f"committed-step{k}": committed(k) for k in (1, 3)},
    "in-commit-finish": in_commit(STEPS + 1),
}


def snapshot(url: str, session_id: str) -> dict[str, Any]:
    """What must match an uninterrupted run, read straight from the tables."""
    with psycopg.connect(libpq_url(url)) as conn:
        session = conn.execute(
            "SELECT status, step_count, message_count, output, run_count FROM helix.sessions WHERE id = %s",
            (session_id,),
        ).fetchone()
        messages = [r[0] for r in conn.execute(
            "SELECT message FROM helix.messages WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %s) ORDER BY seq", (session_id,))]
        seqs = [r[0] for r in conn.execute(
            "SELECT seq FROM helix.messages WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %s) ORDER BY seq", (session_id,))]
        patches = [r[0] for r in conn.execute(
            "SELECT patch FROM helix.state_patches WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %s) ORDER BY step", (session_id,))]
        usage = conn.execute(
            "SELECT source, name, count(*), sum(total_tokens) FROM helix.session_usage(%s)"
            " GROUP BY source, name ORDER BY source, name", (session_id,)).fetchall()
        events = [(r[0], r[1]) for r in conn.execute(
            "SELECT type, step FROM helix.events WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %s) ORDER BY seq", (session_id,))]
        event_seqs = [r[0] for r in conn.execute(
            "SELECT seq FROM helix.events WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %s) ORDER BY seq", (session_id,))]
        state_rows = conn.execute(
            "SELECT count(*) FROM helix.runs WHERE session_num = helix.session_num(%s)", (session_id,)).fetchone()
    assert seqs == list(range(len(seqs))), "message seq numbers have a gap or a duplicate"
    assert event_seqs == list(range(1, len(event_seqs) + 1)), "event seq numbers have a gap or a duplicate"
    parsed = [MessageAdapter.validate_python(m) for m in messages]
    assert unpaired_tool_call_ids(parsed) == [], "the transcript has a tool call without a result"
    return {
        "session": session, "messages": messages, "patches": patches, "usage": usage,
        "events": events, "runs": state_rows,
    }


@pytest.fixture(scope="module")
def baseline(make_database: Callable[[], str], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    url = migrated_database(make_database, SLOW_COMMIT_TRIGGER)
    marks = tmp_path_factory.mktemp("baseline")
    result = finish(start_worker(WORKER, url, "crash-session", "exec-baseline", "start", marks))
    assert result["status"] == "completed" and result["output"] == {"count": STEPS * 2}
    return snapshot(url, "crash-session")


def crash_and_recover(url: str, name: str, point: KillPoint, marks: Path) -> tuple[dict[str, Any], bool]:
    session_id = "crash-session"
    executor_id = f"exec-{name}"
    proc = start_worker(WORKER, url, session_id, executor_id, "start", marks)
    killed = kill_when(proc, url, lambda conn: point(conn, session_id, marks))
    result = finish(start_worker(WORKER, url, session_id, executor_id, "recover", marks))
    return result, killed


def test_every_kill_point_recovers_to_the_uninterrupted_outcome(
    make_database: Callable[[], str], baseline: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> None:
    def run(item: tuple[str, KillPoint]) -> tuple[str, dict[str, Any], dict[str, Any], bool]:
        name, point = item
        url = migrated_database(make_database, SLOW_COMMIT_TRIGGER)
        result, killed = crash_and_recover(url, name, point, tmp_path_factory.mktemp(name))
        return name, result, snapshot(url, "crash-session"), killed

    with ThreadPoolExecutor(max_workers=3) as pool:
        outcomes = list(pool.map(run, KILL_POINTS.items()))

    killed = [name for name, _, _, was_killed in outcomes if was_killed]
    assert len(killed) >= 22, f"only {len(killed)} kill points were reached: {killed}"
    assert {"committed-step1", "committed-step3"} <= set(killed), "the window after a commit was not reached"
    for name, result, snap, _ in outcomes:
        assert result["status"] == "completed", (name, result)
        assert result["output"] == {"count": STEPS * 2}, name
        assert result["step_count"] == STEPS + 1, name
        for key in ("session", "messages", "patches", "usage", "events", "runs"):
            assert snap[key] == baseline[key], f"{name}: {key} differs from the uninterrupted run"
