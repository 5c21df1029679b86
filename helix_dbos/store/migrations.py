"""Apply the numbered SQL files of ``schema/`` to the ``helix`` schema, once each.

``helix.schema_version`` records what ran. Applying twice is a no-op, and two
processes migrating at once serialize on a Postgres advisory lock::

    >>> migrate("postgresql://postgres@127.0.0.1:5432/app")   # doctest: +SKIP
    [1]
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import psycopg

from helix_dbos.database import libpq_url, redact
from helix_dbos.errors import DatabaseError

SCHEMA_DIR = Path(__file__).resolve().parent.parent / "schema"
MIGRATION_LOCK_KEY = 7_346_117_201  # any fixed bigint; names the helix migration lock
_FILE_PATTERN = re.compile(r"^(\d{3})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def load_migrations(directory: Path = SCHEMA_DIR) -> list[Migration]:
    """The migrations in ``directory``, in version order."""
    found = []
    for path in sorted(directory.glob("*.sql")):
        match = _FILE_PATTERN.match(path.name)
        if match is None:
            raise DatabaseError(f"migration file {path.name} must be named NNN_name.sql")
        found.append(Migration(int(match.group(1)), match.group(2), path.read_text()))
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise DatabaseError(f"two migration files share a version number in {directory}")
    return found


def migrate(database_url: str, migrations: list[Migration] | None = None) -> list[int]:
    """Apply every migration not yet recorded; return the versions applied now."""
    pending = load_migrations() if migrations is None else migrations
    try:
        with psycopg.connect(libpq_url(database_url), autocommit=True) as conn:
            conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_KEY,))
            try:
                return _apply_pending(conn, pending)
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_KEY,))
    except psycopg.Error as exc:
        first = (str(exc).strip() or type(exc).__name__).splitlines()[0]
        raise DatabaseError(f"migrating {redact(database_url)} failed: {first}") from None


def applied_versions(database_url: str) -> list[int]:
    """Versions recorded in ``helix.schema_version`` (empty when never migrated)."""
    with psycopg.connect(libpq_url(database_url)) as conn:
        exists = conn.execute("SELECT to_regclass('helix.schema_version')").fetchone()
        if exists is None or exists[0] is None:
            return []
        return [row[0] for row in conn.execute("SELECT version FROM helix.schema_version ORDER BY version")]


def _apply_pending(conn: psycopg.Connection, migrations: list[Migration]) -> list[int]:
    conn.execute("CREATE SCHEMA IF NOT EXISTS helix")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS helix.schema_version ("
        " version integer PRIMARY KEY, name text NOT NULL,"
        " applied_at timestamptz NOT NULL DEFAULT now())"
    )
    done = {row[0] for row in conn.execute("SELECT version FROM helix.schema_version")}
    applied = []
    for migration in migrations:
        if migration.version in done:
            continue
        with conn.transaction():
            conn.execute(migration.sql.encode())
            conn.execute(
                "INSERT INTO helix.schema_version (version, name) VALUES (%s, %s)",
                (migration.version, migration.name),
            )
        applied.append(migration.version)
    return applied
