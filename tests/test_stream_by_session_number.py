"""The rows a step writes name their session by number (store/sql/016: ``helix.stream``;
017: ``transcript``, ``state_log``, ``usage_log``; 018 keys usage by session); views by the
old names show them with the session's id. An upgrade moves the rows as they were, and helix reads a range of the
stream along its key, never sorted. Against a real Postgres."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa

from helix_dbos.database import libpq_url
from helix_dbos.store import reads
from helix_dbos.store.engine import create_engine
from helix_dbos.store.migrations import load_migrations, migrate

BEFORE_NUMBERS = load_migrations()[:15]
"""The migrations up to 015, whose tables were keyed by session id."""

OLD_ROWS = [  # session, seq, run, step, type, data, key
    ("s-one", 1, 1, 0, "run_start", {"run": 1}, None),
    ("s-one", 2, 1, 1, "step_start", {"step": 1}, "1.1.step_start"),
    ("s-one", 3, 1, 1, "text", {"content": "hi"}, "1.1.text"),
    ("s-two", 1, 1, 1, "step_start", {"step": 1}, "1.1.step_start"),
]


def events_view(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    rows = conn.execute("SELECT session_id, seq, run, step, type, data, key FROM helix.events ORDER BY 1, 2")
    return [tuple(r) for r in rows]


def append_once(conn: psycopg.Connection[Any], session: str, step: int, key: str) -> int:
    evs = json.dumps([{"type": "custom", "data": {"k": key}, "key": key}])
    [(written,)] = conn.execute("SELECT helix.append_events_once(%s, 1, %s, %s::jsonb)", (session, step, evs))
    return int(written)


def node_types(plan: dict[str, Any]) -> set[str]:
    """Every node type of an EXPLAIN (FORMAT JSON) plan."""
    return {plan["Node Type"]}.union(*(node_types(p) for p in plan.get("Plans", [])))


def test_an_upgrade_moves_the_stream_as_it_was_and_numbering_goes_on(make_database: Callable[[], str]) -> None:
    url = make_database()
    migrate(url, migrations=BEFORE_NUMBERS)
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        for session in ("s-one", "s-two"):
            conn.execute(
                "INSERT INTO helix.sessions (id, agent_name, root_session_id, event_seq) VALUES (%s, 'a', %s, %s)",
                (session, session, max(r[1] for r in OLD_ROWS if r[0] == session)),
            )
        # the rows as the earlier release wrote them; its triggers' functions are today's
        conn.execute("ALTER TABLE helix.events DISABLE TRIGGER USER")
        for session, seq, run, step, kind, data, key in OLD_ROWS:
            conn.execute(
                "INSERT INTO helix.events (session_id, seq, run, step, type, data, key) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                (session, seq, run, step, kind, json.dumps(data), key),
            )

    assert migrate(url).versions == [m.version for m in load_migrations()[15:]]

    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        assert events_view(conn) == [(s, q, r, t, k, d, key) for s, q, r, t, k, d, key in OLD_ROWS]
        assert append_once(conn, "s-one", 1, "1.1.text") == 0, "a key written before the upgrade is still known"
        assert append_once(conn, "s-one", 2, "1.2.custom") == 1
        [(seq, event_seq)] = conn.execute(
            "SELECT e.seq, s.event_seq FROM helix.events e JOIN helix.sessions s ON s.id = e.session_id"
            " WHERE e.key = '1.2.custom'"
        ).fetchall()
        assert (seq, event_seq) == (4, 4)
        with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState):
            conn.execute(
                "INSERT INTO helix.events (session_id, seq, run, step, type, data) VALUES ('s-two', 2, 1, 1, 'x', '{}')"
            )


def test_appending_to_a_session_that_does_not_exist_says_so(make_database: Callable[[], str]) -> None:
    url = make_database()
    migrate(url)
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        with pytest.raises(psycopg.errors.ForeignKeyViolation, match="session nobody does not exist"):
            append_once(conn, "nobody", 1, "1.1.x")


def test_a_range_of_a_long_stream_is_read_along_its_key_without_a_sort(make_database: Callable[[], str]) -> None:
    url = make_database()
    migrate(url)
    many = json.dumps([{"type": "custom", "data": {"i": i}, "key": f"1.1.k{i}"} for i in range(2000)])
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            for session in ("before", "long", "after"):  # neighbours in the key, on both sides
                conn.execute(
                    sa.text("INSERT INTO helix.sessions (id, agent_name, root_session_id) VALUES (:s, 'a', :s)"),
                    {"s": session},
                )
                conn.execute(sa.text("SELECT helix.append_events_once(:s, 1, 1, CAST(:e AS jsonb))"), {"s": session, "e": many})
        with engine.connect() as conn:
            conn.execute(sa.text("ANALYZE helix.stream"))
            params = {"id": "long", "after": 1990, "limit": 5}
            plan = conn.execute(sa.text(f"EXPLAIN (FORMAT JSON) {reads.EVENTS_AFTER.text}"), params).scalar_one()
            got = reads.events_after(conn, "long", 1990, 5)
    finally:
        engine.dispose()

    assert [(e.session_id, e.seq, e.data) for e in got] == [("long", s, {"i": s - 1}) for s in range(1991, 1996)]
    assert "Sort" not in node_types(plan[0]["Plan"]), plan


def test_an_upgrade_moves_transcript_state_and_usage_as_they_were(make_database: Callable[[], str]) -> None:
    url = make_database()
    migrate(url, migrations=BEFORE_NUMBERS)
    views = {
        "messages": "SELECT session_id, seq, run, step, message FROM helix.messages ORDER BY 1, 2",
        "state_patches": "SELECT session_id, step, part, run, patch, created_at FROM helix.state_patches ORDER BY 1, 2, 3",
        "usage": "SELECT id, session_id, run, step, source, name, input_tokens, output_tokens, total_tokens, cost_usd,"
        " ms, success, created_at FROM helix.usage ORDER BY id",
    }
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        for session in ("s-one", "s-two"):
            conn.execute("INSERT INTO helix.sessions (id, agent_name, root_session_id) VALUES (%s, 'a', %s)", (session, session))
            conn.execute(
                "INSERT INTO helix.messages (session_id, seq, run, step, message) VALUES"
                " (%(s)s, 0, 1, 0, '{\"role\": \"user\", \"content\": \"hi\"}'),"
                " (%(s)s, 1, 1, 1, '{\"role\": \"assistant\", \"content\": \"yes\"}')", {"s": session},
            )
            conn.execute(
                "INSERT INTO helix.state_patches (session_id, step, part, run, patch) VALUES"
                " (%(s)s, 1, 0, 1, '[{\"op\": \"add\", \"path\": \"/n\", \"value\": 1}]'), (%(s)s, 1, 1, 1, '[]')",
                {"s": session},
            )
            conn.execute(
                "INSERT INTO helix.usage (session_id, run, step, source, name, input_tokens, total_tokens, cost_usd)"
                " VALUES (%(s)s, 1, 1, 'llm', 'm', 10, 12, 0.5), (%(s)s, 1, 1, 'tool', 't', 0, 0, NULL)",
                {"s": session},
            )
        before = {name: [tuple(r) for r in conn.execute(sql)] for name, sql in views.items()}

    migrate(url)

    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        assert {name: [tuple(r) for r in conn.execute(sql)] for name, sql in views.items()} == before
        conn.execute(
            "INSERT INTO helix.usage_log (session_num, run, step, source, name) SELECT num, 2, 2, 'llm', 'm'"
            " FROM helix.sessions WHERE id = 's-one'"
        )
        [(new_id,)] = conn.execute("SELECT max(id) FROM helix.usage").fetchall()
        assert new_id == max(row[0] for row in before["usage"]) + 1, "usage ids go on after the moved rows"


def test_a_session_s_usage_is_read_along_the_primary_key_the_only_index_it_keeps(
    make_database: Callable[[], str],
) -> None:
    """018: usage rows are keyed by (session_num, id); a session's summary reads its own
    rows along that key, whatever the other sessions hold (021: the rows are in
    helix.step_usage, and helix.usage_log reads them with what step_finish events hold)."""
    url = make_database()
    migrate(url)
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text(
                "INSERT INTO helix.sessions (id, agent_name, root_session_id)"
                " SELECT s, 'a', s FROM (SELECT 'other-' || i AS s FROM generate_series(1, 300) i) o"
            ))
            conn.execute(sa.text(
                "INSERT INTO helix.usage_log (session_num, run, step, source, name, input_tokens, ms)"
                " SELECT num, 1, i, 'llm', 'm', 10, 1 FROM helix.sessions, generate_series(1, 20) i"
            ))
            conn.execute(sa.text("INSERT INTO helix.sessions (id, agent_name, root_session_id) VALUES ('mine', 'a', 'mine')"))
            conn.execute(sa.text(
                "INSERT INTO helix.usage_log (session_num, run, step, source, name, input_tokens, ms)"
                " SELECT num, 1, 1, src, n, tok, 2.5 FROM helix.sessions,"
                " (VALUES ('llm', 'gpt', 7), ('tool', 'search', 0), ('tool', 'search', 0)) v(src, n, tok) WHERE id = 'mine'"
            ))
        with engine.connect() as conn:
            conn.execute(sa.text("ANALYZE helix.step_usage"))
            indexes = conn.execute(sa.text(
                "SELECT indexrelid::regclass::text, pg_get_indexdef(indexrelid) FROM pg_index"
                " WHERE indrelid = 'helix.step_usage'::regclass"
            )).all()
            summary = reads.usage_summary(conn, "mine")
            plan = conn.execute(
                sa.text("EXPLAIN (FORMAT JSON) SELECT * FROM helix.usage_log WHERE session_num = "
                        "(SELECT num FROM helix.sessions WHERE id = 'mine')")
            ).scalar_one()
    finally:
        engine.dispose()

    assert [name for name, _ in indexes] == ["helix.step_usage_pkey"]
    assert "(session_num, id)" in indexes[0][1]
    assert (summary.llm_calls, summary.input_tokens) == (1, 7)
    assert summary.by_name["tool:search"] == {"calls": 2, "ms": 5.0}
    assert "Seq Scan" not in node_types(plan[0]["Plan"]), plan


EARLIER_RELEASE_WRITES = [  # verbatim, as store/writes.py of the release before 016 ran them
    "WITH s AS (UPDATE helix.sessions SET message_count = message_count + jsonb_array_length(CAST(%(m)s AS jsonb))"
    "  WHERE id = %(id)s RETURNING message_count),"
    " ins AS (INSERT INTO helix.messages (session_id, seq, run, step, message)"
    "  SELECT %(id)s, (SELECT message_count FROM s) - jsonb_array_length(CAST(%(m)s AS jsonb)) + t.ord - 1,"
    "   %(run)s, %(step)s, t.msg FROM jsonb_array_elements(CAST(%(m)s AS jsonb)) WITH ORDINALITY AS t(msg, ord))"
    " SELECT message_count FROM s",
    "INSERT INTO helix.state_patches (session_id, step, part, run, patch) VALUES (%(id)s, %(step)s, 1, %(run)s, %(p)s)",
]


def test_a_worker_of_the_earlier_release_still_writes_messages_and_patches(make_database: Callable[[], str]) -> None:
    """During a rolling deploy, workers of the release before 016 run against the new schema."""
    url = make_database()
    migrate(url)
    params = {"id": "s-old", "run": 1, "step": 1, "m": '[{"role": "user", "content": "hi"}]', "p": "[]"}
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute("INSERT INTO helix.sessions (id, agent_name, root_session_id) VALUES ('s-old', 'a', 's-old')")
        for sql in EARLIER_RELEASE_WRITES:
            conn.execute(sql, params)
        assert conn.execute("SELECT seq, message FROM helix.messages WHERE session_id = 's-old'").fetchall() == [
            (0, {"role": "user", "content": "hi"})
        ]
        assert conn.execute("SELECT step, part, patch FROM helix.state_patches WHERE session_id = 's-old'").fetchall() == [
            (1, 1, [])
        ]
        with pytest.raises(psycopg.errors.ForeignKeyViolation, match="session nobody does not exist"):
            conn.execute(EARLIER_RELEASE_WRITES[1], {**params, "id": "nobody"})
