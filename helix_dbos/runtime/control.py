"""Stopping a session and its running sub-agents, from the executor or an admin shell.

The caller brings its way of cancelling a DBOS workflow (``DBOS.cancel_workflow`` in a
launched process, ``DBOSClient.cancel_workflow`` elsewhere), so both share one rule.
"""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa

from helix_dbos.runtime.requests import run_workflow_id
from helix_dbos.store import reads, writes


def abort_tree(engine: sa.Engine, cancel_workflow: Callable[[str], None], session_id: str, reason: str) -> bool:
    """Cancel the run in progress of ``session_id`` and of its running descendants, parents
    first, and end each ``aborted``. True when at least one run was ended."""
    with engine.connect() as conn:
        running = [row for sid in reads.active_tree(conn, session_id) if (row := reads.get_session_row(conn, sid))]
    aborted = False
    for row in running:
        cancel_workflow(run_workflow_id(row.id, row.run_count))
        with engine.begin() as conn:
            aborted |= writes.end_run(
                conn, session_id=row.id, run=row.run_count, status="aborted", error=reason,
                stop_reason="aborted", event={"type": "aborted", "data": {"reason": reason}},
            )
    return aborted
