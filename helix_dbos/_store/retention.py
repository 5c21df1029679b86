"""Removing finished sessions: which trees may go, and deleting their helix rows.

A session goes only with its whole tree (the root and every sub-agent session under it),
and only when every session of the tree is finished (``completed``, ``failed`` or
``aborted``) since before the cutoff, none has a call still pending, and none of its runs'
DBOS workflows is ``PENDING`` or ``ENQUEUED``. The cutoff is on the database's clock::

    with engine.begin() as conn:
        roots = finished_trees(conn, Cutoff(age=timedelta(days=30)), limit=100)  # rows locked
        ids = tree_workflow_ids(conn, roots)
        ...                                     # delete the workflows through DBOS
        delete_trees(conn, roots)
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from psycopg import Connection
from pydantic import BaseModel, model_validator

from helix_dbos._store import dbos_tables
from helix_dbos._store.statements import first_value

FINISHED_STATUSES = ("completed", "failed", "aborted")
"""Statuses of a session that is done; an ``interrupted`` one waits to be resumed and stays."""

_TABLES = (
    "events", "messages", "state_patches", "tool_call_answers", "pending_tool_calls", "tool_outcomes",
    "tool_attempts", "state_snapshots", "run_adoptions", "toolset_tools", "runs", "companion_notices", "companions",
)
"""Every helix table that names a session (``session_num``), in an order that keeps foreign
keys valid."""


class Cutoff(BaseModel):
    """Sessions finished before ``at``, or more than ``age`` ago (database clock)."""

    at: datetime | None = None
    age: timedelta | None = None

    @model_validator(mode="after")
    def _one_of(self) -> Cutoff:
        if (self.at is None) == (self.age is None):
            raise ValueError("give a cutoff as either 'at' (a time) or 'age' (a duration)")
        return self


_ROOTS = "SELECT num FROM helix.sessions WHERE id = ANY (%(roots)s)"
"""The numbers of the root sessions ``:roots`` (ids)."""

_FINISHED_TREES = ("""
WITH cutoff AS (SELECT COALESCE(CAST(%(at)s AS timestamptz), now() - make_interval(secs => %(age)s)) AS t)
SELECT r.id FROM helix.sessions r, cutoff
 WHERE r.parent_session_num IS NULL
   AND NOT EXISTS (
       SELECT 1 FROM helix.sessions s
        WHERE s.root_session_num = r.num
          AND (s.status <> ALL (%(finished)s) OR s.updated_at >= cutoff.t
               OR EXISTS (SELECT 1 FROM helix.pending_tool_calls p
                           WHERE p.session_num = s.num AND p.status = 'pending')
               OR EXISTS (SELECT 1 FROM helix.runs u
                           WHERE u.session_num = s.num AND {running})))
 ORDER BY r.updated_at, r.id
 LIMIT %(limit)s
 FOR UPDATE OF r SKIP LOCKED
""".format(running=dbos_tables.WORKFLOW_RUNNING.format(workflow_id="u.workflow_id")))


def finished_trees(conn: Connection[Any], cutoff: Cutoff, limit: int | None) -> list[str]:
    """Up to ``limit`` (None: all) root session ids whose whole tree may be removed, oldest
    first, their rows locked until the transaction ends (rows another transaction holds
    are skipped: that session is in use)."""
    age = None if cutoff.age is None else cutoff.age.total_seconds()
    params = {"at": cutoff.at, "age": age, "finished": list(FINISHED_STATUSES), "limit": limit}
    return [row[0] for row in conn.execute(_FINISHED_TREES, params)]


def tree_sizes(conn: Connection[Any], roots: list[str]) -> int:
    """How many sessions the trees of ``roots`` hold."""
    return int(first_value(conn, f"SELECT count(*) FROM helix.sessions WHERE root_session_num IN ({_ROOTS})", {"roots": roots}))


def tree_workflow_ids(conn: Connection[Any], roots: list[str]) -> list[str]:
    """The DBOS workflow ids of every run of every session in the trees of ``roots``: each
    run's own, and the waiter and continuation of each step at which it parked."""
    rows = conn.execute(
        (
            f"WITH tree AS (SELECT num, id FROM helix.sessions WHERE root_session_num IN ({_ROOTS})),"
            " parked AS (SELECT DISTINCT t.id, p.run, p.step, p.workflow_id"
            "             FROM helix.pending_tool_calls p JOIN tree t ON t.num = p.session_num)"
            " SELECT 'helix:' || t.id || ':run:' || u.run FROM helix.runs u JOIN tree t ON t.num = u.session_num"
            " UNION SELECT workflow_id FROM parked"
            " UNION SELECT 'helix:' || id || ':run:' || run || ':step:' || step FROM parked"
            " ORDER BY 1"
        ),
        {"roots": roots},
    )
    return [row[0] for row in rows]


def delete_trees(conn: Connection[Any], roots: list[str]) -> int:
    """Delete every helix row of the trees of ``roots``; returns how many sessions went."""
    tree = f"SELECT num FROM helix.sessions WHERE root_session_num IN ({_ROOTS})"
    for table in _TABLES:
        conn.execute(f"DELETE FROM helix.{table} WHERE session_num IN ({tree})", {"roots": roots})
    deleted = conn.execute(
        f"DELETE FROM helix.sessions WHERE root_session_num IN ({_ROOTS})", {"roots": roots}
    )
    return int(deleted.rowcount)
