"""Apply the numbered SQL files of ``store/sql/`` to the ``helix`` schema, once each.

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
from helix_dbos.errors import DatabaseError, SchemaOutdatedError

SCHEMA_DIR = Path(__file__).resolve().parent / "sql"
MIGRATION_LOCK_KEY = 7_346_117_201  # any fixed bigint; names the helix migration lock
DBOS_HOOKS_VERSIONS = (4, 10, 12)
"""The migrations that define ``helix.install_dbos_hooks()`` (the last one counts)."""
HOOK_TRIGGERS = (
    "helix_follow_status", "helix_follow_new_workflow", "helix_refuse_pickled_message", "helix_refuse_pickled_run",
    "helix_write_carried_events",
)
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
    """Apply DBOS's system-table migrations, then every helix migration not yet recorded,
    then (re)install helix's triggers on DBOS's tables; return the helix versions applied now.

    helix's tables live in the DBOS system database, next to DBOS's (see 004_dbos_sync.sql).
    """
    pending = load_migrations() if migrations is None else migrations
    _migrate_dbos(database_url)
    try:
        with psycopg.connect(libpq_url(database_url), autocommit=True) as conn:
            conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_KEY,))
            try:
                applied = _apply_pending(conn, pending)
                if any(m.version in DBOS_HOOKS_VERSIONS for m in pending):
                    conn.execute("SELECT helix.install_dbos_hooks()")
                return applied
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_KEY,))
    except psycopg.Error as exc:
        first = (str(exc).strip() or type(exc).__name__).splitlines()[0]
        raise DatabaseError(f"migrating {redact(database_url)} failed: {first}") from None


def _migrate_dbos(database_url: str) -> None:
    from dbos import DBOS

    try:
        DBOS.migrate(database_url)
    except Exception as exc:
        first = (str(exc).strip() or type(exc).__name__).splitlines()[0]
        raise DatabaseError(f"creating DBOS's system tables in {redact(database_url)} failed: {first}") from None


def applied_versions(database_url: str) -> list[int]:
    """Versions recorded in ``helix.schema_version`` (empty when never migrated)."""
    with psycopg.connect(libpq_url(database_url)) as conn:
        exists = conn.execute("SELECT to_regclass('helix.schema_version')").fetchone()
        if exists is None or exists[0] is None:
            return []
        return [row[0] for row in conn.execute("SELECT version FROM helix.schema_version ORDER BY version")]


def check_schema(database_url: str) -> None:
    """Raise :class:`SchemaOutdatedError` unless every migration of this library has run.

    Only ``helix-dbos migrate`` and the executor (unless told not to) migrate; every
    other command checks with this and says what to run.
    """
    try:
        applied = set(applied_versions(database_url))
    except psycopg.Error as exc:
        first = (str(exc).strip() or type(exc).__name__).splitlines()[0]
        raise DatabaseError(f"cannot read the helix schema of {redact(database_url)}: {first}") from None
    missing = [m.version for m in load_migrations() if m.version not in applied]
    if not missing:
        if _installed_hooks(database_url) != set(HOOK_TRIGGERS):
            raise SchemaOutdatedError(
                f"helix's triggers on DBOS's tables are missing in {redact(database_url)} (was `dbos reset` run?):"
                " run `helix-dbos migrate --database-url URL`"
            )
        return
    if not applied:
        problem = f"{redact(database_url)} has no helix schema"
    else:
        problem = f"the helix schema of {redact(database_url)} is at version {max(applied)}, this library needs {max(missing)}"
    raise SchemaOutdatedError(f"{problem}: run `helix-dbos migrate --database-url URL` first")


def _installed_hooks(database_url: str) -> set[str]:
    with psycopg.connect(libpq_url(database_url)) as conn:
        rows = conn.execute(
            "SELECT tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n"
            " ON n.oid = c.relnamespace WHERE n.nspname = 'dbos' AND tgname = ANY(%s)",
            (list(HOOK_TRIGGERS),),
        )
        return {row[0] for row in rows}


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
