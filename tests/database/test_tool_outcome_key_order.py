"""A tool result reads back with its keys in the order the tool wrote them from a recorded
outcome (a run handed to another worker while its tool ran returns it). Postgres's jsonb
would sort them, and a moved run's transcript would differ from an unmoved one's."""

from __future__ import annotations

import json

from helix_dbos._store.pools import create_pool
from helix_dbos._store.reads import recorded_tool_outcome
from helix_dbos._store.records import RecordedOutcome
from helix_dbos._store.writes import record_tool_outcome

UNSORTED = {"tool_call_id": "c1", "result": {"session": "s", "step": 4, "b": [{"zz": 1, "a": 2}]}}


def test_a_recorded_outcome_keeps_its_key_order(migrated_url: str):
    pool = create_pool(migrated_url)
    try:
        with pool.connection() as conn, conn.transaction():
            conn.execute("INSERT INTO helix.sessions (num, id, agent_name, root_session_num)"
                         " SELECT n, 's', 'a', n FROM nextval(pg_get_serial_sequence('helix.sessions', 'num')) AS n")
            record_tool_outcome(conn, RecordedOutcome(session_id="s", step=1, tool_call_id="c1", run=1, tool_name="t",
                                                      call_digest="d", outcome=UNSORTED))
        with pool.connection() as conn:
            back = recorded_tool_outcome(conn, "s", 1, "c1", "d")
    finally:
        pool.close()
    assert json.dumps(back) == json.dumps(UNSORTED)
