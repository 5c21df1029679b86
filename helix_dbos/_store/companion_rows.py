"""The SQL of persistent sub-agents: a parent's companions and their notices."""

from __future__ import annotations

from typing import Any

from psycopg import Connection

from helix_dbos._store.reads import session_num
from helix_dbos._store.records import CompanionRecord, CompanionNotice
from helix_dbos._store.statements import all_rows, first_row, first_value


_COMPANIONS = (
    "SELECT c.name, c.agent_type, c.mode, s.id AS child_session_id, s.status, s.run_count, s.output, s.error"
    " FROM helix.companions c JOIN helix.sessions s ON s.num = c.child_session_num"
)
_OF_PARENT = f"c.session_num = {session_num('p')}"


def find(conn: Connection[Any], parent_session_id: str, name: str) -> CompanionRecord | None:
    """The parent's companion named ``name``, with its session's status (locked FOR UPDATE)."""
    row = first_row(
        conn, f"{_COMPANIONS} WHERE {_OF_PARENT} AND c.name = %(n)s FOR UPDATE OF s", {"p": parent_session_id, "n": name}
    )
    return CompanionRecord.model_validate(row) if row else None


def list_for(conn: Connection[Any], parent_session_id: str) -> list[CompanionRecord]:
    """The parent's companions, oldest first."""
    rows = all_rows(conn, f"{_COMPANIONS} WHERE {_OF_PARENT} ORDER BY c.created_at, c.name", {"p": parent_session_id})
    return [CompanionRecord.model_validate(r) for r in rows]


def count_of_type(conn: Connection[Any], parent_session_id: str, agent_type: str) -> int:
    return int(first_value(
        conn, f"SELECT count(*) FROM helix.companions c WHERE {_OF_PARENT} AND c.agent_type = %(t)s",
        {"p": parent_session_id, "t": agent_type},
    ))


def insert(conn: Connection[Any], parent_session_id: str, name: str, agent_type: str, mode: str, child: str) -> None:
    conn.execute(
        (
            "INSERT INTO helix.companions (session_num, name, agent_type, mode, child_session_num)"
            f" VALUES ({session_num('p')}, %(n)s, %(t)s, %(m)s, {session_num('c')})"
        ),
        {"p": parent_session_id, "n": name, "t": agent_type, "m": mode, "c": child},
    )


def take_notices(conn: Connection[Any], parent_session_id: str, run: int, step: int) -> list[CompanionNotice]:
    """The notices the parent's step ``step`` delivers: those never delivered, and those
    delivered at a step that was not committed; marked as delivered at this step."""
    rows = all_rows(
        conn,
        "UPDATE helix.companion_notices n SET delivered_run = %(run)s, delivered_step = %(step)s"
        " FROM helix.sessions p, helix.sessions c"
        " WHERE p.id = %(p)s AND n.session_num = p.num AND c.num = n.child_session_num"
        "  AND (n.delivered_step IS NULL OR n.delivered_step > p.step_count)"
        " RETURNING n.name, c.id AS child_session_id, n.run, n.status, n.output, n.error, n.created_at",
        {"p": parent_session_id, "run": run, "step": step},
    )
    notices = [CompanionNotice.model_validate(r) for r in rows]
    return sorted(notices, key=lambda n: (n.created_at, n.child_session_id, n.run))


def mark_delivered(conn: Connection[Any], child_session_id: str, child_run: int, run: int, step: int) -> None:
    """A notice the parent got as a tool's result (``waitForResult``) is not delivered again."""
    conn.execute(
        (
            "UPDATE helix.companion_notices SET delivered_run = %(run)s, delivered_step = %(step)s"
            f" WHERE child_session_num = {session_num('c')} AND run = %(r)s"
        ),
        {"c": child_session_id, "r": child_run, "run": run, "step": step},
    )
