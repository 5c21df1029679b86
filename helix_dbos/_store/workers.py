"""Worker leases in ``helix.workers``: every statement that reads or writes them.

Each function takes an open psycopg connection and runs its statements in the caller's
transaction; times are the database's (``now()``), so the clocks of the machines that
run workers never matter. :mod:`helix_dbos._client.leases` keeps a process's lease with
these; ``helix-dbos workers`` lists them::

    with psycopg.connect(url) as conn:
        for worker in list_workers(conn):
            print(worker.executor_id, worker.status)
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import psycopg
from psycopg.rows import class_row

NOTIFY_CHANNEL = "helix_workers"
"""A released lease is announced here (its executor id), so live processes adopt it at once."""

_COLUMNS = (
    "executor_id, application_name, application_version, queues, host, pid, state, started_at, last_seen,"
    " expires_at, adopted_by, adopted_at, adopted_runs, expires_at < now() AS expired"
)


@dataclass(frozen=True)
class WorkerRecord:
    """One row of ``helix.workers``: a process that runs (or ran) helix workflows."""

    executor_id: str
    application_name: str
    application_version: str
    queues: list[str] | None
    """The queues it takes runs from; None: every queue of its application."""
    host: str
    pid: int
    state: str
    """As stored: ``live``, ``draining``, ``released`` or ``adopted``."""
    started_at: datetime
    last_seen: datetime
    expires_at: datetime
    adopted_by: str | None
    adopted_at: datetime | None
    adopted_runs: int | None
    expired: bool

    @property
    def status(self) -> str:
        """``live``, ``draining``, ``dead`` (its lease expired and nobody adopted it yet),
        ``released`` (it stopped; not adopted yet) or ``adopted``."""
        if self.state in ("live", "draining") and self.expired:
            return "dead"
        return self.state

    @property
    def adoptable(self) -> bool:
        """Whether a live process of its application version should adopt it now."""
        return self.status in ("dead", "released")


@dataclass(frozen=True)
class LeaseClaim:
    """What a process asks for when it takes the lease of its executor id."""

    executor_id: str
    application_name: str
    application_version: str
    queues: list[str] | None
    host: str
    pid: int
    token: str
    ttl_sec: float


def get_worker(conn: psycopg.Connection, executor_id: str, *, lock: bool = False) -> WorkerRecord | None:
    """The lease row of ``executor_id`` (with ``lock``: held until the transaction ends)."""
    query = f"SELECT {_COLUMNS} FROM helix.workers WHERE executor_id = %s" + (" FOR UPDATE" if lock else "")
    with conn.cursor(row_factory=class_row(WorkerRecord)) as cur:
        return cur.execute(query, (executor_id,)).fetchone()


def claim_new_lease(conn: psycopg.Connection, claim: LeaseClaim) -> bool:
    """Insert ``claim`` as the live holder of an executor id that has no lease row yet;
    False when it has one (then lock that row with :func:`get_worker` and decide).

    The primary key settles a race for a new id: of two processes claiming it at once,
    the second's insert waits until the first's transaction ends and then finds its row.
    The row stays locked by the claimer until its transaction ends."""
    row = conn.execute(
        """
        INSERT INTO helix.workers (executor_id, application_name, application_version, queues, host, pid, token,
                                   state, expires_at)
        VALUES (%(executor_id)s, %(application_name)s, %(application_version)s, %(queues)s, %(host)s, %(pid)s,
                %(token)s, 'live', now() + make_interval(secs => %(ttl_sec)s))
        ON CONFLICT (executor_id) DO NOTHING
        RETURNING 1
        """,
        claim.__dict__,
    ).fetchone()
    return row is not None


def take_lease(conn: psycopg.Connection, claim: LeaseClaim) -> None:
    """Write ``claim`` over the lease row of its executor id as its live holder (the caller
    locked the row and decided that its holder is gone)."""
    conn.execute(
        """
        UPDATE helix.workers SET
            application_name = %(application_name)s, application_version = %(application_version)s,
            queues = %(queues)s, host = %(host)s, pid = %(pid)s, token = %(token)s,
            state = 'live', started_at = now(), last_seen = now(), expires_at = now() + make_interval(secs => %(ttl_sec)s),
            adopted_by = NULL, adopted_at = NULL, adopted_runs = NULL
         WHERE executor_id = %(executor_id)s
        """,
        claim.__dict__,
    )


def renew_lease(conn: psycopg.Connection, executor_id: str, token: str, ttl_sec: float, state: str | None = None) -> bool:
    """Move the lease's expiry ``ttl_sec`` ahead (and set ``state`` when given); False when
    the holder no longer holds it: another process took the id, or adopted it."""
    row = conn.execute(
        """
        UPDATE helix.workers
           SET last_seen = now(), expires_at = now() + make_interval(secs => %s), state = COALESCE(%s, state)
         WHERE executor_id = %s AND token = %s AND state IN ('live', 'draining')
        RETURNING 1
        """,
        (ttl_sec, state, executor_id, token),
    ).fetchone()
    return row is not None


def set_queues(conn: psycopg.Connection, executor_id: str, queues: list[str] | None) -> None:
    """Record the queues the holder takes runs from (known once DBOS is launched)."""
    conn.execute("UPDATE helix.workers SET queues = %s WHERE executor_id = %s", (queues, executor_id))


def release_lease(conn: psycopg.Connection, executor_id: str, token: str) -> bool:
    """Mark the lease released (adoptable at once) and announce it; False when not held."""
    row = conn.execute(
        """
        UPDATE helix.workers SET state = 'released', last_seen = now(), expires_at = now()
         WHERE executor_id = %s AND token = %s AND state IN ('live', 'draining')
        RETURNING 1
        """,
        (executor_id, token),
    ).fetchone()
    if row is not None:
        conn.execute("SELECT pg_notify(%s, %s)", (NOTIFY_CHANNEL, executor_id))
    return row is not None


def lock_adoptable(
    conn: psycopg.Connection, application_name: str, application_version: str, adopter: str
) -> str | None:
    """Lock one lease of the application version that is due for adoption (expired or
    released) and not locked by another adopter; its executor id, or None. The lock lasts
    until the caller's transaction ends, so two adopters never take the same one."""
    row = conn.execute(
        """
        SELECT executor_id FROM helix.workers
         WHERE application_name = %s AND application_version = %s AND executor_id <> %s
           AND state IN ('live', 'draining', 'released') AND expires_at < now()
         ORDER BY expires_at
         LIMIT 1
           FOR UPDATE SKIP LOCKED
        """,
        (application_name, application_version, adopter),
    ).fetchone()
    return None if row is None else str(row[0])


def record_run_adoptions(conn: psycopg.Connection, executor_id: str, adopter: str, workflow_ids: list[str]) -> None:
    """Record, before :func:`mark_adopted`, that ``adopter`` adopted the runs whose
    workflows (a run's own, or the waiter of its pending calls) are ``workflow_ids``,
    from ``executor_id``, which died (its lease expired) or was released."""
    conn.execute(
        """
        INSERT INTO helix.run_adoptions (session_num, run, from_executor, from_status, adopted_by)
        SELECT DISTINCT r.session_num, r.run, w.executor_id,
               CASE WHEN w.state = 'released' THEN 'released' ELSE 'dead' END, %(adopter)s
          FROM helix.workers w, helix.runs r
         WHERE w.executor_id = %(dead)s
           AND (r.workflow_id = ANY(%(ids)s)
                OR (r.session_num, r.run) IN (SELECT p.session_num, p.run FROM helix.pending_tool_calls p
                                               WHERE p.workflow_id = ANY(%(ids)s)))
        ON CONFLICT DO NOTHING
        """,
        {"adopter": adopter, "dead": executor_id, "ids": workflow_ids},
    )


def mark_adopted(conn: psycopg.Connection, executor_id: str, adopter: str, runs: int) -> None:
    """Record that ``adopter`` handed ``runs`` runs of ``executor_id`` back to their queues."""
    conn.execute(
        "UPDATE helix.workers SET state = 'adopted', adopted_by = %s, adopted_at = now(), adopted_runs = %s"
        " WHERE executor_id = %s",
        (adopter, runs, executor_id),
    )


def list_workers(conn: psycopg.Connection) -> list[WorkerRecord]:
    """Every lease, the most recently seen first."""
    with conn.cursor(row_factory=class_row(WorkerRecord)) as cur:
        return cur.execute(f"SELECT {_COLUMNS} FROM helix.workers ORDER BY last_seen DESC, executor_id").fetchall()
