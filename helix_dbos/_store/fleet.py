"""What the fleet is doing, read in one transaction for a metrics scrape: runs in
progress, calls waiting for people, queued runs and worker leases.

Every figure comes from the database, so any process with its URL reports the same
truth (``helix_dbos.observability.fleet`` turns them into metrics)::

    with psycopg.connect(url) as conn:
        print(read_fleet(conn).runs)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import psycopg

from helix_dbos._store import dbos_tables, workers


@dataclass(frozen=True)
class Fleet:
    """Counts keyed by their labels."""

    runs: dict[tuple[str, str], int] = field(default_factory=dict)
    """(agent, status) -> runs in progress: ``active``, ``awaiting_approval``, ``awaiting_client_tool``
    (a session has at most one, and its status is that run's)."""
    pending: dict[str, tuple[int, float]] = field(default_factory=dict)
    """kind (``approval`` | ``client``) -> (calls waiting for an answer, seconds the oldest has waited)."""
    queues: dict[tuple[str, str], int] = field(default_factory=dict)
    """(queue, DBOS status ``ENQUEUED`` | ``PENDING``) -> workflows."""
    leases: dict[str, int] = field(default_factory=dict)
    """lease status (``live``, ``draining``, ``dead``, ``released``, ``adopted``) -> workers."""
    adopted_runs: int = 0
    memories: dict[str, int] = field(default_factory=dict)
    """embedding status in the active space (``pending``, ``complete``, ``failed``; ``text_only``
    without one) -> memories."""
    """Runs handed back by adoptions of the leases still on record."""


def read_fleet(conn: psycopg.Connection) -> Fleet:
    """The fleet's figures now, read in one repeatable-read snapshot."""
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        runs = conn.execute(
            """
            SELECT agent_name, status, count(*) FROM helix.sessions
             WHERE status IN ('active', 'awaiting_approval', 'awaiting_client_tool')
             GROUP BY 1, 2
            """
        ).fetchall()
        pending = conn.execute(
            """
            SELECT kind, count(*), COALESCE(extract(epoch FROM now() - min(requested_at)), 0)::float8
              FROM helix.pending_tool_calls WHERE status = 'pending' GROUP BY 1
            """
        ).fetchall()
        queues = conn.execute(dbos_tables.QUEUED_WORKFLOWS).fetchall()
        leases = workers.list_workers(conn)
        memories = conn.execute(
            """
            SELECT COALESCE(e.status, 'text_only'), count(*) FROM helix.memories m
              LEFT JOIN helix.memory_embeddings e ON e.memory_id = m.id
               AND e.space_id = (SELECT id FROM helix.memory_spaces WHERE active)
             GROUP BY 1
            """
        ).fetchall() if conn.execute("SELECT to_regclass('helix.memories')").fetchone() != (None,) else []
    statuses: dict[str, int] = {}
    for lease in leases:
        statuses[lease.status] = statuses.get(lease.status, 0) + 1
    return Fleet(
        runs={(agent, status): n for agent, status, n in runs},
        pending={kind: (n, age) for kind, n, age in pending},
        queues={(queue, status): n for queue, status, n in queues},
        leases=statuses,
        adopted_runs=sum(lease.adopted_runs or 0 for lease in leases if lease.status == "adopted"),
        memories={status: n for status, n in memories},
    )
