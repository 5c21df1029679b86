"""Connection faults for tests: terminate backends of the test's own database (never
another database's)::

    assert terminate_other_backends(url) == 3                 # every other backend
    terminate_other_backends(url, "pid = %s", conn.info.backend_pid)   # one of them
"""

from __future__ import annotations

from typing import Any

import psycopg

from helix_dbos._database import libpq_url


def terminate_other_backends(url: str, where: str = "true", *params: Any) -> int:
    """Terminate the backends of the database at ``url`` that match ``where`` (this
    call's own excepted), waiting up to 5 s for each to be gone; how many there were."""
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        return conn.execute(
            "SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity"
            f" WHERE datname = current_database() AND pid <> pg_backend_pid() AND {where}",
            params,
        ).fetchone()[0]
