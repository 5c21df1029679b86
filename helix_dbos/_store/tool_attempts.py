"""Where tool calls' bodies were started (``helix.tool_attempts``): every statement that
reads or writes them.

A tool step records its attempt (this process: :data:`PROCESS`, its executor id, host
and pid) before it runs the body. When a run is handed to another worker with a call in
flight, the step runs that call again and first counts the earlier attempts that were
lost: no live lease in ``helix.workers`` of their executor id, host and pid was taken
before they started (the process was killed, froze for longer than its lease, or was
cut off from the database, and its runs were adopted; or it was restarted, even as the
same executor id and pid, as a container restarts). A process that releases its lease
(a drain) forgets its attempts: the calls it handed back were not lost::

    with pool.connection() as conn, conn.transaction():
        lost = lost_attempts(conn, attempt)       # executor ids, one per lost attempt
        start_attempts(conn, [attempt])           # or the step's parallel calls at once
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from psycopg import Connection

from helix_dbos._store.reads import session_num


PROCESS = uuid.uuid4().hex
"""This process, in ``helix.tool_attempts`` (a restarted process is another one, whatever
its pid)."""


@dataclass(frozen=True)
class Attempt:
    """This process starting one tool call's body."""

    session_id: str
    step: int
    tool_call_id: str
    executor_id: str
    host: str
    pid: int
    process: str = PROCESS


def start_attempts(conn: Connection[Any], attempts: Sequence[Attempt]) -> None:
    """Record, in one statement, that this process starts the bodies of calls of one step
    (once per process and call)."""
    first = attempts[0]
    assert all((a.session_id, a.step, a.process) == (first.session_id, first.step, first.process) for a in attempts)
    conn.execute(
        (
            "INSERT INTO helix.tool_attempts (session_num, step, tool_call_id, executor_id, host, pid, process)"
            f" SELECT {session_num('session_id')}, %(step)s, ids.id, %(executor_id)s, %(host)s, %(pid)s, %(process)s"
            " FROM unnest(CAST(%(ids)s AS text[])) AS ids(id)"
            " ON CONFLICT DO NOTHING"
        ),
        {**asdict(first), "ids": [a.tool_call_id for a in attempts]},
    )


def lost_attempts(conn: Connection[Any], attempt: Attempt) -> list[str]:
    """The executor ids of the call's earlier attempts by other processes that no longer
    hold the live lease they started them under, oldest first."""
    rows = conn.execute(
        (
            "SELECT a.executor_id FROM helix.tool_attempts a"
            f" WHERE a.session_num = {session_num('session_id')} AND a.step = %(step)s AND a.tool_call_id = %(tool_call_id)s"
            "   AND a.process <> %(process)s"
            "   AND NOT EXISTS (SELECT 1 FROM helix.workers w"
            "                    WHERE w.executor_id = a.executor_id AND w.host = a.host AND w.pid = a.pid"
            "                      AND w.state IN ('live', 'draining') AND w.started_at <= a.started_at)"
            " ORDER BY a.started_at"
        ),
        asdict(attempt),
    )
    return [row[0] for row in rows.fetchall()]


def forget_handed_back(conn: Connection[Any]) -> None:
    """Forget this process's attempts as it releases its lease: the calls it still ran
    were handed back, not lost."""
    conn.execute("DELETE FROM helix.tool_attempts WHERE process = %s", (PROCESS,))
