"""The index of event keys fills its pages as sessions' steps write (_store/sql/014, 016):
keyed by (session, step, key), a step's keys land at the end of its session's range, so the
index the runs leave is about as small as one built in a single pass over their rows.
(Keyed by (session, key) it was 1.44 times that: from step 10 on, keys sort between a
session's older ones, '1.10.' before '1.2.', and the pages they land in split in half.)
Against a real Postgres."""

from __future__ import annotations

import json
from collections.abc import Callable

import psycopg

from helix_dbos._database import libpq_url
from helix_dbos._store.migrations import migrate

SESSIONS, STEPS = 10, 20


def writes_of_a_step(step: int) -> list[tuple[int, list[str]]]:
    """The keyed writes of one step with two tool calls, in the order a run makes them: the
    model's calls (its checkpoint), each result (its tool's), then the commit's events
    with the next step's step_start, which the commit writes at that step."""
    return [
        (step, ["call:a", "call:b"]), (step, ["result:a"]), (step, ["result:b"]),
        (step, ["patch", "step_finish"]), (step + 1, ["step_start"]),
    ]


def keyed(step: int, parts: list[str]) -> str:
    return json.dumps([{"type": "custom", "data": {}, "key": f"1.{step}.{part}"} for part in parts])


def test_runs_leave_the_key_index_about_as_small_as_a_fresh_build(make_database: Callable[[], str]) -> None:
    url = make_database()
    migrate(url)
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        for session in (f"s{n:02}" for n in range(SESSIONS)):  # one after another, ids in creation order
            conn.execute(
                "INSERT INTO helix.sessions (num, id, agent_name, root_session_num, run_count)"  # run 1 in progress
                " SELECT n, %s, 'a', n, 1 FROM nextval(pg_get_serial_sequence('helix.sessions', 'num')) AS n", (session,)
            )
            for step in range(1, STEPS + 1):
                for at, parts in writes_of_a_step(step):
                    conn.execute(
                        "SELECT helix.append_events_once(%s, 1, %s, %s::jsonb)", (session, at, keyed(at, parts))
                    )
        [(index, definition)] = conn.execute(  # the unique index on keys, whatever its columns
            "SELECT indexrelid::regclass::text, pg_get_indexdef(indexrelid) FROM pg_index"
            " WHERE indrelid = 'helix.events'::regclass AND indisunique AND indpred IS NOT NULL"
        ).fetchall()
        conn.execute(f"CREATE INDEX fresh_build ON helix.events USING {definition.split(' USING ')[1]}")
        [(grown, built, written)] = conn.execute(
            "SELECT pg_relation_size(%s::regclass), pg_relation_size('helix.fresh_build'),"
            " (SELECT count(*) FROM helix.events WHERE key IS NOT NULL)", (index,)
        ).fetchall()

    assert written == SESSIONS * STEPS * 7
    assert grown <= 1.25 * built, f"{index}: {grown} bytes as written against {built} built at once"
