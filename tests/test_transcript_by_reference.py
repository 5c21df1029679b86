"""A step's transcript row leaves out what the step's events in the stream hold word for
word, and reads it back from there (store/sql/019: ``helix.compact_messages``,
``helix.expand_messages``, the view ``helix.transcript`` over ``helix.step_messages``).
Against a real Postgres, through ``helix.commit_step`` itself."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from helix_dbos.database import libpq_url
from helix_dbos.store.migrations import migrate

ASSISTANT = {
    "role": "assistant",
    "content": "Let me look.",
    "tool_calls": [
        {"id": "same", "name": "search", "arguments": {"q": "dbos"}},
        {"id": "other", "name": "search", "arguments": {"q": "what the model sent"}},
        {"id": "f1", "name": "__finish__", "arguments": {"answer": 42}},
    ],
}
RESULTS = [
    {"role": "tool", "tool_call_id": "same", "tool_name": "search", "content": "{\"hits\":3}", "is_error": False},
    {"role": "tool", "tool_call_id": "other", "tool_name": "search", "content": "not what was streamed", "is_error": False},
    {"role": "tool", "tool_call_id": "f1", "tool_name": "__finish__", "content": "{\"acknowledged\":true}", "is_error": False},
]
EVENTS = [  # what the step streamed: the first call and result as committed, the second not
    {"type": "text", "data": {"content": "Let me look."}, "key": "1.1.text"},
    {"type": "tool_call", "data": {"input": {"q": "dbos"}, "tool_name": "search", "tool_call_id": "same"}, "key": "1.1.call:same"},
    {"type": "tool_call", "data": {"input": {"q": "streamed"}, "tool_name": "search", "tool_call_id": "other"}, "key": "1.1.call:other"},
    {"type": "tool_result", "data": {"content": "{\"hits\":3}", "is_error": False, "tool_name": "search", "tool_call_id": "same"},
     "key": "1.1.result:same"},
    {"type": "tool_result", "data": {"content": "streamed", "is_error": False, "tool_name": "search", "tool_call_id": "other"},
     "key": "1.1.result:other"},
]
MESSAGES = [ASSISTANT, *RESULTS]


def commit_step_one(conn: psycopg.Connection[Any], session: str) -> None:
    conn.execute("INSERT INTO helix.sessions (id, agent_name, root_session_id) VALUES (%s, 'a', %s)", (session, session))
    payload = {"session_id": session, "run": 1, "step": 1, "messages": MESSAGES, "events": EVENTS, "usage": []}
    conn.execute("SELECT helix.commit_step(%s::jsonb)", (json.dumps(payload),))


def stored(conn: psycopg.Connection[Any], session: str) -> Any:
    return conn.execute(
        "SELECT messages FROM helix.step_messages WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %s)",
        (session,),
    ).fetchone()[0]


@pytest.fixture
def url(make_database: Callable[[], str]) -> str:
    url = make_database()
    migrate(url)
    return url


def test_what_the_stream_holds_word_for_word_is_stored_once_and_read_back_whole(url: str) -> None:
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        commit_step_one(conn, "s")
        row = stored(conn, "s")
        whole = conn.execute("SELECT message FROM helix.messages WHERE session_id = 's' ORDER BY seq").fetchall()

    assert row == [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "same"},
            ASSISTANT["tool_calls"][1],  # its event's input differs: kept
            ASSISTANT["tool_calls"][2],  # __finish__ streams no event: kept
        ]},
        {"role": "tool", "tool_call_id": "same"},
        RESULTS[1],  # its event's content differs: kept
        RESULTS[2],
    ]
    assert [m for (m,) in whole] == MESSAGES


def test_the_release_before_reads_forks_and_appends_with_its_own_sql(url: str) -> None:
    """A worker of the release before 019 reads and writes ``helix.transcript`` by name
    while a deploy rolls (its statements verbatim, from store/*.py at 7ad72ef)."""
    num = "(SELECT num FROM helix.sessions WHERE id = %(id)s)"
    read = (  # reads._MESSAGES
        "SELECT seq, message FROM (SELECT t.first_seq + m.ord - 1 AS seq, t.run, t.step, m.message FROM helix.transcript t"
        " CROSS JOIN LATERAL jsonb_array_elements(t.messages) WITH ORDINALITY AS m(message, ord)"
        f" WHERE t.session_num = {num}) x ORDER BY seq"
    )
    fork = (  # writes.fork_session, its transcript copy
        "INSERT INTO helix.transcript (session_num, first_seq, run, step, messages)"
        f" SELECT {num.replace('id)s', 'new)s')},"
        "  COALESCE(sum(jsonb_array_length(messages)) OVER (ORDER BY first_seq ROWS UNBOUNDED PRECEDING), 0)"
        "  - jsonb_array_length(messages), 0, step, messages"
        f" FROM helix.transcript WHERE session_num = {num} AND step <= %(n)s"
    )
    append = (  # writes.append_messages
        "WITH s AS (UPDATE helix.sessions SET message_count = message_count + jsonb_array_length(CAST(%(m)s AS jsonb))"
        "  WHERE id = %(id)s RETURNING message_count),"
        " ins AS (INSERT INTO helix.transcript (session_num, first_seq, run, step, messages)"
        f"  SELECT {num}, (SELECT message_count FROM s) - jsonb_array_length(CAST(%(m)s AS jsonb)),"
        "   %(run)s, %(step)s, CAST(%(m)s AS jsonb) WHERE jsonb_array_length(CAST(%(m)s AS jsonb)) > 0)"
        " SELECT message_count FROM s"
    )
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        commit_step_one(conn, "s")
        assert [m for _, m in conn.execute(read, {"id": "s"})] == MESSAGES

        conn.execute("INSERT INTO helix.sessions (id, agent_name, root_session_id) VALUES ('f', 'a', 'f')")
        conn.execute(fork, {"id": "s", "new": "f", "n": 1})
        assert stored(conn, "f") == MESSAGES, "a fork has no stream of its own: its rows are whole"
        assert [m for _, m in conn.execute(read, {"id": "f"})] == MESSAGES

        user = {"role": "user", "content": "and then?"}
        conn.execute(append, {"id": "s", "m": json.dumps([user]), "run": 2, "step": 1})
        assert [m for _, m in conn.execute(read, {"id": "s"})] == [*MESSAGES, user]


def test_a_transcript_that_reads_an_event_no_longer_in_the_stream_says_so(url: str) -> None:
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        commit_step_one(conn, "s")
        conn.execute("DELETE FROM helix.stream WHERE key = '1.1.result:same'")
        with pytest.raises(psycopg.errors.DataCorrupted, match="event 1.1.result:same of step 1"):
            conn.execute("SELECT message FROM helix.messages WHERE session_id = 's'").fetchall()
