"""Crash test for live events: SIGKILL a real worker after some of a step's
events are in the durable stream but before the step commits, recover, and the stream
must be the uninterrupted run's: seq 1..N without a gap, no event key twice, the same
events in the same order.

The worker is ``crash_worker.py`` (five steps of two parallel tools, of 0.06 s and 0.3 s,
then ``__finish__``), on a database of its own per case whose commits take 0.4 s (a test
trigger). Kill points: while the tools run, once the model's ``tool_call`` events are
streamed; once the quick tool's ``tool_result`` is streamed and the step is not
committed; while the step's commit runs, which writes the slow tool's result (a step's
live events wait 25 ms for its commit, which then writes them). The events come with
their steps' checkpoints, and a loaded machine can still let the commit win the race to a
point; such a case is tried again on a new database, up to ``ATTEMPTS`` times, and must
reach its point in one of them.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import pytest

from helix_dbos._database import libpq_url

from crash_kit import SLOW_COMMIT_TRIGGER, finish, kill_when, migrated_database, start_worker  # type: ignore[import-not-found]

WORKER = Path(__file__).with_name("crash_worker.py")
SESSION = "live-crash"
STEPS = 5
ATTEMPTS = 5

KillPoint = Callable[[psycopg.Connection], bool]


def _count(conn: psycopg.Connection, step: int, event_type: str) -> int:
    row = conn.execute(
        "SELECT count(*) FROM helix.events WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %s) AND step = %s AND type = %s",
        (SESSION, step, event_type),
    ).fetchone()
    return int(row[0]) if row else 0


def _uncommitted(conn: psycopg.Connection, step: int) -> bool:
    row = conn.execute("SELECT step_count FROM helix.sessions WHERE id = %s", (SESSION,)).fetchone()
    return row is not None and row[0] == step - 1


def calls_streamed(step: int) -> KillPoint:
    """The step's two tool_call events are in the stream, no tool_result yet."""
    return lambda conn: _count(conn, step, "tool_call") == 2 and _count(conn, step, "tool_result") == 0


def result_streamed(step: int) -> KillPoint:
    """A tool_result of the step is in the stream and the step is not committed."""
    return lambda conn: _count(conn, step, "tool_result") >= 1 and _uncommitted(conn, step)


def committing(step: int) -> KillPoint:
    """A tool_result of the step is in the stream and the step's commit is running (it
    writes the other result and the step's state_patch)."""
    return lambda conn: _count(conn, step, "tool_result") >= 1 and _uncommitted(conn, step) and _commit_running(conn)


def _commit_running(conn: psycopg.Connection) -> bool:
    row = conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        " AND state = 'active' AND query LIKE '%helix.commit_step%'"
    ).fetchone()
    return bool(row and row[0])


KILL_POINTS: dict[str, KillPoint] = {
    "calls-streamed-step1": calls_streamed(1),
    "calls-streamed-step3": calls_streamed(3),
    "result-streamed-step2": result_streamed(2),
    "result-streamed-step4": result_streamed(4),
    "committing-step3": committing(3),
    "committing-step5": committing(5),
}


def stream(url: str) -> list[tuple[int, int, str, str | None]]:
    """The session's durable stream: (seq, step, type, key)."""
    with psycopg.connect(libpq_url(url)) as conn:
        return [
            (r[0], r[1], r[2], r[3])
            for r in conn.execute("SELECT seq, step, type, key FROM helix.events WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %s) ORDER BY seq",
                                  (SESSION,))
        ]


def assert_gap_free_and_unique(events: list[tuple[int, int, str, str | None]]) -> None:
    assert [seq for seq, *_ in events] == list(range(1, len(events) + 1)), "the stream has a gap or a duplicate seq"
    keys = [key for *_, key in events if key is not None]
    assert len(keys) == len(set(keys)), f"an event key was written twice: {keys}"


def crash_and_recover(url: str, name: str, point: KillPoint, marks: Path) -> bool:
    executor_id = f"exec-{name}"
    proc = start_worker(WORKER, url, SESSION, executor_id, "start", marks)
    killed = kill_when(proc, url, lambda conn: conn.execute("SELECT to_regclass('helix.events')").fetchone() != (None,) and point(conn))
    result = finish(start_worker(WORKER, url, SESSION, executor_id, "recover", marks))
    assert result["status"] == "completed" and result["output"] == {"count": STEPS * 2}, (name, result)
    return killed


def test_a_kill_after_live_events_recovers_to_the_uninterrupted_stream(
    make_database: Callable[[], str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    url = migrated_database(make_database, SLOW_COMMIT_TRIGGER)
    result = finish(start_worker(WORKER, url, SESSION, "exec-live-baseline", "start", tmp_path_factory.mktemp("baseline")))
    assert result["status"] == "completed"
    baseline = stream(url)
    assert_gap_free_and_unique(baseline)

    def run(item: tuple[str, KillPoint]) -> tuple[str, bool, list[tuple[int, int, str, str | None]]]:
        name, point = item
        for attempt in range(ATTEMPTS):
            case_url = migrated_database(make_database, SLOW_COMMIT_TRIGGER)
            killed = crash_and_recover(case_url, name, point, tmp_path_factory.mktemp(f"{name}-{attempt}"))
            events = stream(case_url)
            assert_gap_free_and_unique(events)  # a run the kill missed must be whole too
            if killed:
                break
        return name, killed, events

    with ThreadPoolExecutor(max_workers=3) as pool:
        outcomes = list(pool.map(run, KILL_POINTS.items()))

    for name, killed, events in outcomes:
        assert killed, f"{name}: the kill point was never reached"
        assert_gap_free_and_unique(events)
        assert [(step, kind) for _, step, kind, _ in events] == [(step, kind) for _, step, kind, _ in baseline], name
        assert sorted(str(key) for *_, key in events) == sorted(str(key) for *_, key in baseline), name
