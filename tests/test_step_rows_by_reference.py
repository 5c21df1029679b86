"""What a step's events in the stream hold word for word is stored once, there: the
transcript's row leaves it out and reads it back (store/sql/019: ``helix.compact_messages``,
``helix.expand_messages``, the view ``helix.transcript`` over ``helix.step_messages``), and
a step's state patch that its patch event holds gets no row (020: the view
``helix.state_log`` over ``helix.step_patches`` and the stream). Against a real Postgres,
through ``helix.commit_step`` itself."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa

from helix_dbos.database import libpq_url
from helix_dbos.store import reads
from helix_dbos.store.engine import create_engine

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


def test_what_the_stream_holds_word_for_word_is_stored_once_and_read_back_whole(migrated_url: str) -> None:
    with psycopg.connect(libpq_url(migrated_url), autocommit=True) as conn:
        commit_step_one(conn, "s")
        row = stored(conn, "s")
        whole = conn.execute("SELECT message FROM helix.messages WHERE session_id = 's' ORDER BY seq").fetchall()

    assert row == [
        {"role": "assistant", "content": None, "tool_calls": [
            "same",
            ASSISTANT["tool_calls"][1],  # its event's input differs: kept
            ASSISTANT["tool_calls"][2],  # __finish__ streams no event: kept
        ]},
        "same",
        RESULTS[1],  # its event's content differs: kept
        RESULTS[2],
    ]
    assert [m for (m,) in whole] == MESSAGES


def test_an_assistant_message_of_tool_calls_only_is_stored_as_its_calls(migrated_url: str) -> None:
    calls_only = {"role": "assistant", "tool_calls": ASSISTANT["tool_calls"][:2]}
    messages = [calls_only, *RESULTS[:2]]
    with psycopg.connect(libpq_url(migrated_url), autocommit=True) as conn:
        conn.execute("INSERT INTO helix.sessions (id, agent_name, root_session_id) VALUES ('s', 'a', 's')")
        payload = {"session_id": "s", "run": 1, "step": 1, "messages": messages, "events": EVENTS, "usage": []}
        conn.execute("SELECT helix.commit_step(%s::jsonb)", (json.dumps(payload),))
        row = stored(conn, "s")
        whole = conn.execute("SELECT message FROM helix.messages WHERE session_id = 's' ORDER BY seq").fetchall()

    assert row == [["same", ASSISTANT["tool_calls"][1]], "same", RESULTS[1]]
    assert [m for (m,) in whole] == messages


def test_a_row_in_the_shapes_of_019_is_read_back_whole(migrated_url: str) -> None:
    """Rows a worker of versions 19 to 21 committed stay as they are."""
    before = [
        {"role": "assistant", "content": None, "tool_calls": [{"id": "same"}, ASSISTANT["tool_calls"][1]]},
        {"role": "tool", "tool_call_id": "same"},
        RESULTS[1],
    ]
    with psycopg.connect(libpq_url(migrated_url), autocommit=True) as conn:
        conn.execute("INSERT INTO helix.sessions (id, agent_name, root_session_id) VALUES ('s', 'a', 's')")
        conn.execute("SELECT helix.commit_step(%s::jsonb)", (json.dumps(
            {"session_id": "s", "run": 1, "step": 1, "messages": [], "events": EVENTS, "usage": []}),))
        conn.execute("INSERT INTO helix.step_messages (session_num, first_seq, run, step, messages)"
                     " SELECT num, 0, 1, 1, %s::jsonb FROM helix.sessions WHERE id = 's'", (json.dumps(before),))
        whole = conn.execute("SELECT message FROM helix.messages WHERE session_id = 's' ORDER BY seq").fetchall()

    assert [m for (m,) in whole] == [
        {**ASSISTANT, "tool_calls": ASSISTANT["tool_calls"][:2]}, *RESULTS[:2]
    ]


def test_the_release_before_reads_forks_and_appends_with_its_own_sql(migrated_url: str) -> None:
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
    with psycopg.connect(libpq_url(migrated_url), autocommit=True) as conn:
        commit_step_one(conn, "s")
        assert [m for _, m in conn.execute(read, {"id": "s"})] == MESSAGES

        conn.execute("INSERT INTO helix.sessions (id, agent_name, root_session_id) VALUES ('f', 'a', 'f')")
        conn.execute(fork, {"id": "s", "new": "f", "n": 1})
        assert stored(conn, "f") == MESSAGES, "a fork has no stream of its own: its rows are whole"
        assert [m for _, m in conn.execute(read, {"id": "f"})] == MESSAGES

        user = {"role": "user", "content": "and then?"}
        conn.execute(append, {"id": "s", "m": json.dumps([user]), "run": 2, "step": 1})
        assert [m for _, m in conn.execute(read, {"id": "s"})] == [*MESSAGES, user]


def test_the_tail_from_the_last_assistant_message_reads_back_no_earlier_step(migrated_url: str) -> None:
    """Each new run of a session reads that tail (the legacy ``__finish__`` heal): it finds
    the last step row with an assistant message from the rows as stored, and reads parts
    back from the stream for that row and later ones only."""
    answer = {"role": "assistant", "content": "Done."}
    with psycopg.connect(libpq_url(migrated_url), autocommit=True) as conn:
        commit_step_one(conn, "s")
        payload = {"session_id": "s", "run": 1, "step": 2, "messages": [answer], "usage": [],
                   "events": [{"type": "text", "data": {"content": "Done."}, "key": "1.2.text"}]}
        conn.execute("SELECT helix.commit_step(%s::jsonb)", (json.dumps(payload),))
        conn.execute("DELETE FROM helix.stream WHERE key = '1.1.result:same'")  # step 1 can no longer be read back
    engine = create_engine(migrated_url)
    try:
        with engine.connect() as conn:
            tail = reads.load_messages_since_last_assistant(conn, "s")
            with pytest.raises(sa.exc.DBAPIError, match="event 1.1.result:same"):
                reads.load_messages(conn, "s")
    finally:
        engine.dispose()
    assert [m.model_dump(exclude_none=True) for m in tail] == [{**answer, "tool_calls": []}]


def test_the_tail_starts_at_an_assistant_message_stored_as_its_calls(migrated_url: str) -> None:
    calls_only = {"role": "assistant", "tool_calls": [{"id": "n", "name": "note", "arguments": {}}]}
    result = {"role": "tool", "tool_call_id": "n", "tool_name": "note", "content": "ok", "is_error": False}
    events = [
        {"type": "tool_call", "data": {"input": {}, "tool_name": "note", "tool_call_id": "n"}, "key": "1.2.call:n"},
        {"type": "tool_result", "data": {k: v for k, v in result.items() if k != "role"}, "key": "1.2.result:n"},
    ]
    with psycopg.connect(libpq_url(migrated_url), autocommit=True) as conn:
        commit_step_one(conn, "s")
        payload = {"session_id": "s", "run": 1, "step": 2, "messages": [calls_only, result], "usage": [], "events": events}
        conn.execute("SELECT helix.commit_step(%s::jsonb)", (json.dumps(payload),))
        assert conn.execute("SELECT messages FROM helix.step_messages WHERE step = 2").fetchone()[0] == [["n"], "n"]
        conn.execute("DELETE FROM helix.stream WHERE key = '1.1.result:same'")  # step 1 can no longer be read back
    engine = create_engine(migrated_url)
    try:
        with engine.connect() as conn:
            tail = reads.load_messages_since_last_assistant(conn, "s")
    finally:
        engine.dispose()
    assert [m.model_dump(mode="json", exclude_none=True) for m in tail] == [calls_only, result]


def test_a_transcript_that_reads_an_event_no_longer_in_the_stream_says_so(migrated_url: str) -> None:
    with psycopg.connect(libpq_url(migrated_url), autocommit=True) as conn:
        commit_step_one(conn, "s")
        conn.execute("DELETE FROM helix.stream WHERE key = '1.1.result:same'")
        with pytest.raises(psycopg.errors.DataCorrupted, match="event 1.1.result:same of step 1"):
            conn.execute("SELECT message FROM helix.messages WHERE session_id = 's'").fetchall()


PATCH = [{"op": "add", "path": "/notes/-", "value": "x"}]


def commit(conn: psycopg.Connection[Any], session: str, step: int, patch: Any, events: list[dict[str, Any]]) -> None:
    finish = {"type": "step_finish", "data": {"step": step}, "key": f"1.{step}.step_finish"}
    payload = {"session_id": session, "run": 1, "step": step, "messages": [], "patch": patch,
               "events": [*events, finish], "usage": []}
    conn.execute("SELECT helix.commit_step(%s::jsonb)", (json.dumps(payload),))


def patch_event(step: int, patches: Any, part: str = "patch") -> dict[str, Any]:
    return {"type": "state_patch", "data": {"patches": patches}, "key": f"1.{step}.{part}"}


def state_log(conn: psycopg.Connection[Any], session: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in conn.execute(
        "SELECT step, part, run, patch FROM helix.state_patches WHERE session_id = %s ORDER BY step, part", (session,)
    )]


def stored_patches(conn: psycopg.Connection[Any], session: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in conn.execute(
        "SELECT step, part, patch FROM helix.step_patches"
        " WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %s) ORDER BY step, part", (session,)
    )]


def test_a_patch_its_event_holds_gets_no_row_and_the_log_reads_it_from_the_stream(migrated_url: str) -> None:
    other = [{"op": "replace", "path": "/count", "value": 2}]
    with psycopg.connect(libpq_url(migrated_url), autocommit=True) as conn:
        conn.execute("INSERT INTO helix.sessions (id, agent_name, root_session_id) VALUES ('s', 'a', 's')")
        commit(conn, "s", 1, PATCH, [patch_event(1, PATCH)])  # the event holds it: no row
        commit(conn, "s", 2, PATCH + other, [patch_event(2, PATCH), patch_event(2, other, "patch:f1")])  # a finisher wrote too
        commit(conn, "s", 3, None, [patch_event(3, PATCH)])  # an event, and no patch committed
        commit(conn, "s", 4, None, [])  # nothing changed
        # a step that published its patch and was never committed (its run was aborted)
        conn.execute("SELECT helix.append_events_once('s', 1, 5, %s::jsonb)", (json.dumps([patch_event(5, other)]),))

        assert stored_patches(conn, "s") == [(2, 0, PATCH + other), (3, 0, [])]
        assert state_log(conn, "s") == [(1, 0, 1, PATCH), (2, 0, 1, PATCH + other), (3, 0, 1, [])]


def test_the_release_before_reads_saves_forks_and_prunes_the_state_log_with_its_own_sql(migrated_url: str) -> None:
    """A worker of the release before 020 uses ``helix.state_log`` by name while a deploy
    rolls (its statements verbatim, from store/*.py at 7ad72ef)."""
    num = "(SELECT num FROM helix.sessions WHERE id = %(id)s)"
    read = (  # reads.load_state
        f"SELECT patch FROM helix.state_log WHERE session_num = {num} AND step > %(from)s"
        " AND (CAST(%(at)s AS integer) IS NULL OR step <= %(at)s) ORDER BY step, part"
    )
    save = (  # writes.save_hook_state
        "INSERT INTO helix.state_log (session_num, step, part, run, patch)"
        f" VALUES ({num}, %(n)s, 1, %(run)s, CAST(%(p)s AS jsonb))"
    )
    fork = (  # writes.fork_session
        "INSERT INTO helix.state_log (session_num, step, part, run, patch)"
        f" SELECT {num.replace('id)s', 'new)s')}, step, part, 0, patch FROM helix.state_log"
        f" WHERE session_num = {num} AND step <= %(n)s"
    )
    prune = f"DELETE FROM helix.state_log WHERE session_num IN ({num})"  # retention.delete_trees
    hook = [{"op": "add", "path": "/seen", "value": True}]
    with psycopg.connect(libpq_url(migrated_url), autocommit=True) as conn:
        conn.execute("INSERT INTO helix.sessions (id, agent_name, root_session_id) VALUES ('s', 'a', 's')")
        commit(conn, "s", 1, PATCH, [patch_event(1, PATCH)])
        conn.execute(save, {"id": "s", "n": 1, "run": 1, "p": json.dumps(hook)})
        assert [p for (p,) in conn.execute(read, {"id": "s", "from": 0, "at": None})] == [PATCH, hook]

        conn.execute("INSERT INTO helix.sessions (id, agent_name, root_session_id) VALUES ('f', 'a', 'f')")
        conn.execute(fork, {"id": "s", "new": "f", "n": 1})
        assert stored_patches(conn, "f") == [(1, 0, PATCH), (1, 1, hook)], "a fork has no stream: its rows hold it all"

        conn.execute(prune, {"id": "s"})
        assert stored_patches(conn, "s") == []


# --- usage (021) -----------------------------------------------------------------------

MODEL_USAGE = {"input_tokens": 7, "output_tokens": 3, "total_tokens": 10, "cost_usd": 0.5, "latency_ms": 12.5}
LEDGER = (
    "SELECT run, step, source, name, input_tokens, output_tokens, total_tokens, cost_usd, ms, success"
    " FROM helix.usage WHERE session_id = %s"
    " ORDER BY run, step, array_position(ARRAY['llm', 'tool', 'client_tool_wait'], source), id, name"
)


def commit_usage(conn: psycopg.Connection[Any], session: str, step: int, usage: dict[str, Any],
                 rows: list[dict[str, Any]]) -> None:
    finish = {"type": "step_finish", "data": {"step": step, "stop_reason": None, "usage": usage},
              "key": f"1.{step}.step_finish"}
    payload = {"session_id": session, "run": 1, "step": step, "messages": [], "events": [finish], "usage": rows}
    conn.execute("SELECT helix.commit_step(%s::jsonb)", (json.dumps(payload),))


def stored_usage(conn: psycopg.Connection[Any], session: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in conn.execute(
        "SELECT step, source, name FROM helix.step_usage"
        " WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %s) ORDER BY id", (session,)
    )]


def test_a_step_s_usage_is_read_from_its_step_finish_and_only_the_rest_is_stored(migrated_url: str) -> None:
    """Step 1 commits as this release does: its step_finish names the model and lists the
    tools, and it sends no rows. Step 2 commits as the release before did: rows, and a
    step_finish with the model's usage only. Each is counted once."""
    held = {**MODEL_USAGE, "model": "gpt", "success": False,
            "tools": [{"name": "search", "ms": 2.5, "success": True}, {"name": "fetch", "ms": 1.0, "success": False}]}
    before = [{"source": "llm", "name": "gpt", "input_tokens": 7, "output_tokens": 3, "total_tokens": 10,
               "cost_usd": 0.5, "ms": 12.5, "success": True},
              {"source": "tool", "name": "search", "ms": 4.0, "success": True}]
    with psycopg.connect(libpq_url(migrated_url), autocommit=True) as conn:
        conn.execute("INSERT INTO helix.sessions (id, agent_name, root_session_id) VALUES ('s', 'a', 's')")
        commit_usage(conn, "s", 1, held, [])
        commit_usage(conn, "s", 2, MODEL_USAGE, before)
        ledger = [tuple(r) for r in conn.execute(LEDGER, ("s",))]
        stored = stored_usage(conn, "s")
    with create_engine(migrated_url).connect() as conn:
        summary = reads.usage_summary(conn, "s")

    assert stored == [(2, "llm", "gpt"), (2, "tool", "search")]
    assert ledger == [
        (1, 1, "llm", "gpt", 7, 3, 10, 0.5, 12.5, False),
        (1, 1, "tool", "fetch", 0, 0, 0, None, 1.0, False),
        (1, 1, "tool", "search", 0, 0, 0, None, 2.5, True),
        (1, 2, "llm", "gpt", 7, 3, 10, 0.5, 12.5, True),
        (1, 2, "tool", "search", 0, 0, 0, None, 4.0, True),
    ]
    assert (summary.llm_calls, summary.tool_calls, summary.input_tokens, summary.cost_usd) == (2, 3, 14, 1.0)
    assert summary.by_name["tool:search"] == {"calls": 2, "ms": 6.5}


def result_event(step: int, call: str, ms: float | None, is_error: bool = False) -> dict[str, Any]:
    data = {"tool_call_id": call, "tool_name": call, "content": "r", "is_error": is_error, "ms": ms}
    return {"type": "tool_result", "data": data, "key": f"1.{step}.result:{call}"}


def test_a_committed_step_s_tool_calls_are_read_from_its_tool_result_events(migrated_url: str) -> None:
    """As this release streams them (022): a tool_result says how long its tool ran, and a
    step_finish lists no tools. A result with no time (a call answered without running)
    and the results of a step never committed count nothing; a step the release before
    committed (its tools in its step_finish) counts as it did."""
    finish = {"type": "step_finish", "data": {"step": 2, "stop_reason": None, "usage": {**MODEL_USAGE, "model": "gpt"}},
              "key": "1.2.step_finish"}
    with psycopg.connect(libpq_url(migrated_url), autocommit=True) as conn:
        conn.execute("INSERT INTO helix.sessions (id, agent_name, root_session_id) VALUES ('s', 'a', 's')")
        commit_usage(conn, "s", 1, {**MODEL_USAGE, "model": "gpt", "tools": [{"name": "search", "ms": 2.5}]}, [])
        events = [result_event(2, "search", 1.5), result_event(2, "fetch", 0.5, is_error=True),
                  result_event(2, "denied", None), finish]
        conn.execute("SELECT helix.commit_step(%s::jsonb)", (json.dumps(
            {"session_id": "s", "run": 1, "step": 2, "messages": [], "events": events, "usage": []}),))
        conn.execute("SELECT helix.append_events_once('s', 1, 3, %s::jsonb)", (json.dumps([result_event(3, "search", 9.0)]),))  # a step that never commits
        ledger = [tuple(r) for r in conn.execute(LEDGER, ("s",))]

    assert ledger == [
        (1, 1, "llm", "gpt", 7, 3, 10, 0.5, 12.5, True),
        (1, 1, "tool", "search", 0, 0, 0, None, 2.5, True),
        (1, 2, "llm", "gpt", 7, 3, 10, 0.5, 12.5, True),
        (1, 2, "tool", "fetch", 0, 0, 0, None, 0.5, False),
        (1, 2, "tool", "search", 0, 0, 0, None, 1.5, True),
    ]


def test_a_step_finish_that_names_no_model_holds_no_usage(migrated_url: str) -> None:
    """A step_finish of the release before, or one a test writes, adds nothing to the ledger."""
    with psycopg.connect(libpq_url(migrated_url), autocommit=True) as conn:
        conn.execute("INSERT INTO helix.sessions (id, agent_name, root_session_id) VALUES ('s', 'a', 's')")
        commit_usage(conn, "s", 1, {**MODEL_USAGE, "tools": [{"name": "search", "ms": 1.0, "success": True}]}, [])
        assert conn.execute(LEDGER, ("s",)).fetchall() == []


def test_the_release_before_sums_and_prunes_usage_with_its_own_sql(migrated_url: str) -> None:
    """A worker of the release before 021 reads and deletes ``helix.usage_log`` by name
    while a deploy rolls (its statements verbatim, from store/*.py at a5185d0)."""
    summary = (  # reads.usage_summary
        "SELECT source, name, count(*) AS calls, sum(input_tokens) AS i, sum(output_tokens) AS o,"
        " sum(total_tokens) AS t, sum(cost_usd) AS c, sum(ms) AS ms"
        " FROM helix.usage_log WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %(id)s)"
        " GROUP BY source, name"
    )
    prune = (  # retention.delete_trees, in its order: the stream first
        "DELETE FROM helix.{table} WHERE session_num IN"
        " (SELECT num FROM helix.sessions WHERE root_session_id = ANY (%(roots)s))"
    )
    held = {**MODEL_USAGE, "model": "gpt", "success": True, "tools": [{"name": "search", "ms": 2.5, "success": True}]}
    row_before = {"source": "tool", "name": "search", "ms": 4.0, "success": True}
    with psycopg.connect(libpq_url(migrated_url), autocommit=True) as conn:
        conn.execute("INSERT INTO helix.sessions (id, agent_name, root_session_id) VALUES ('s', 'a', 's')")
        commit_usage(conn, "s", 1, held, [])
        commit_usage(conn, "s", 2, MODEL_USAGE, [row_before])
        sums = sorted(tuple(r) for r in conn.execute(summary, {"id": "s"}))
        for table in ("stream", "step_messages", "step_patches", "usage_log"):
            conn.execute(prune.format(table=table), {"roots": ["s"]})
        left = conn.execute("SELECT count(*) FROM helix.usage_log").fetchone()[0]
        stored = stored_usage(conn, "s")

    assert sums == [("llm", "gpt", 1, 7, 3, 10, 0.5, 12.5), ("tool", "search", 2, 0, 0, 0, None, 6.5)]
    assert (left, stored) == (0, [])
