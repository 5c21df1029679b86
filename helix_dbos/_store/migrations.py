"""Bring the ``helix`` schema up to this library's.

The schema is a list of numbered SQL files in ``_store/sql/``, ``NNN_name.sql``, applied
once each, in order, and recorded in ``helix.schema_version``. ``001_baseline.sql`` is
the schema of the first release; every later file is additive (new tables, columns,
indexes, a function replaced), so a worker of the previous release keeps working while a
deploy rolls. A file that may have run is never edited.

:func:`migrate` runs DBOS's own migrations first, then, in ONE transaction, every helix
file not yet recorded and helix's triggers on DBOS's tables (:mod:`dbos_tables`). It
refuses a DBOS schema this release was not tested with. Applying twice is a no-op, and
two processes migrating at once serialize on a Postgres advisory lock::

    >>> migrate("postgresql://postgres@127.0.0.1:5432/app")   # doctest: +SKIP
    Migrated(versions=[1])
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from helix_dbos._error_text import first_line
from helix_dbos._database import libpq_url, redact
from helix_dbos.errors import DatabaseError, SchemaOutdatedError
from helix_dbos._store import dbos_tables

SCHEMA_DIR = Path(__file__).resolve().parent / "sql"
MIGRATION_LOCK_KEY = 7_346_117_201  # any fixed bigint; names the helix migration lock
_FILE_PATTERN = re.compile(r"^(\d{3})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


@dataclass(frozen=True)
class Migrated:
    """The versions one :func:`migrate` applied (empty: the schema was up to date)."""

    versions: list[int] = field(default_factory=list)


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


def migrate(database_url: str, migrations: list[Migration] | None = None) -> Migrated:
    """Apply DBOS's system-table migrations, then, in one transaction, every helix migration
    not yet recorded, and (re)install helix's triggers on DBOS's tables; return what was
    applied now. Raises :class:`SchemaOutdatedError` for a DBOS schema this release was not
    tested with, writing nothing of helix's."""
    migrations = load_migrations() if migrations is None else migrations
    _migrate_dbos(database_url)
    try:
        with psycopg.connect(libpq_url(database_url), autocommit=True) as conn:
            conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_KEY,))
            try:
                with conn.transaction():
                    dbos_tables.require_tested_dbos(conn)
                    conn.execute(dbos_tables.LOCK_HOOKED_TABLES)
                    _create_bookkeeping(conn)
                    applied = _apply_pending(conn, migrations)
                    dbos_tables.install(conn)
                return Migrated(applied)
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_KEY,))
    except psycopg.Error as exc:
        raise DatabaseError(f"migrating {redact(database_url)} failed: {first_line(exc)}") from None


def _migrate_dbos(database_url: str) -> None:
    from dbos import DBOS

    try:
        DBOS.migrate(database_url)
    except Exception as exc:
        raise DatabaseError(f"creating DBOS's system tables in {redact(database_url)} failed: {first_line(exc)}") from None


def applied_versions(database_url: str) -> list[int]:
    """Versions recorded in ``helix.schema_version`` (empty when never migrated)."""
    with psycopg.connect(libpq_url(database_url)) as conn:
        exists = conn.execute("SELECT to_regclass('helix.schema_version')").fetchone()
        if exists is None or exists[0] is None:
            return []
        return [row[0] for row in conn.execute("SELECT version FROM helix.schema_version ORDER BY version")]


def check_schema(database_url: str) -> None:
    """Raise :class:`SchemaOutdatedError` unless every migration of this library has been
    applied, helix's triggers on DBOS's tables are there, and DBOS's schema is one this
    release was tested with.

    Only ``helix-dbos migrate`` and the executor (unless told not to) migrate; every
    other command checks with this and says what to run.
    """
    migrations = load_migrations()
    try:
        applied = set(applied_versions(database_url))
        with psycopg.connect(libpq_url(database_url)) as conn:
            missing_hooks = dbos_tables.missing_hooks(conn) if applied else []
            if applied:
                dbos_tables.require_tested_dbos(conn)
    except psycopg.Error as exc:
        raise DatabaseError(f"cannot read the helix schema of {redact(database_url)}: {first_line(exc)}") from None
    missing = [m.version for m in migrations if m.version not in applied]
    if not applied:
        problem = f"{redact(database_url)} has no helix schema"
    elif missing:
        problem = f"the helix schema of {redact(database_url)} is at version {max(applied)}, this library needs {max(missing)}"
    elif missing_hooks:
        problem = f"helix's triggers on DBOS's tables are missing in {redact(database_url)} (was `dbos reset` run?)"
    else:
        return
    raise SchemaOutdatedError(f"{problem}: run `helix-dbos migrate --database-url URL` first")


def _create_bookkeeping(conn: psycopg.Connection) -> None:
    conn.execute("CREATE SCHEMA IF NOT EXISTS helix")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS helix.schema_version ("
        " version integer PRIMARY KEY, name text NOT NULL,"
        " applied_at timestamptz NOT NULL DEFAULT now())"
    )


def _apply_pending(conn: psycopg.Connection, migrations: list[Migration]) -> list[int]:
    done = {row[0] for row in conn.execute("SELECT version FROM helix.schema_version")}
    applied = []
    for migration in migrations:
        if migration.version in done:
            continue
        conn.execute(migration.sql.encode())
        conn.execute(
            "INSERT INTO helix.schema_version (version, name) VALUES (%s, %s)",
            (migration.version, migration.name),
        )
        applied.append(migration.version)
    return applied
