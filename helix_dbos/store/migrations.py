"""Bring the ``helix`` schema up to this library's: its functions, then its tables.

Two kinds of SQL file live in ``store/sql/``:

- ``functions/<name>.sql``: one SQL function each, as it is now (``CREATE OR REPLACE``).
  A function's file is applied whenever its text differs from what last ran
  (``helix.schema_functions`` keeps a SHA-256 of each), so changing a function is an edit
  of its file, never a copy of it in a new migration.
- ``NNN_name.sql``: the numbered migrations, applied once each, in order
  (``helix.schema_version``): tables, columns, indexes, the triggers on helix's tables.
  They are append-only. One that changed only functions keeps its comment, as the record
  of what changed and why.

Functions go first, with ``check_function_bodies`` off, so a new install's triggers find
them; once the tables are there, each replaced function is created again with its body
checked, so a broken file fails the migration instead of the first call. Everything runs
in one transaction: an upgrade lands whole or not at all.
Applying twice is a no-op, and two processes migrating at once serialize on a Postgres
advisory lock::

    >>> migrate("postgresql://postgres@127.0.0.1:5432/app")   # doctest: +SKIP
    Migrated(versions=[1, 2, ...], functions=['active_statuses', ...])
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from helix_dbos.database import libpq_url, redact
from helix_dbos.errors import DatabaseError, SchemaOutdatedError

SCHEMA_DIR = Path(__file__).resolve().parent / "sql"
FUNCTIONS_DIR = SCHEMA_DIR / "functions"
MIGRATION_LOCK_KEY = 7_346_117_201  # any fixed bigint; names the helix migration lock
HOOK_TRIGGERS = (
    "helix_follow_status", "helix_follow_new_workflow", "helix_refuse_pickled_message", "helix_refuse_pickled_run",
    "helix_write_carried_events",
)
LOCK_DBOS_TABLES = (
    "LOCK TABLE dbos.workflow_status, dbos.notifications, dbos.operation_outputs IN SHARE ROW EXCLUSIVE MODE"
)
"""What ``migrate`` takes first: the DBOS tables that carry helix's triggers, in the mode
that (re)installing the triggers takes at the end anyway. A DBOS transaction writes one of
them and then, in helix's trigger, reads or writes helix's tables; a migration that
altered a helix table before waiting for a DBOS table took the two in the other order,
and a worker checkpointing while a new release migrated could deadlock with it."""
_FILE_PATTERN = re.compile(r"^(\d{3})_([a-z0-9_]+)\.sql$")
_FUNCTION_PATTERN = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


@dataclass(frozen=True)
class Function:
    """One SQL function's file: ``helix.<name>`` as it is now."""

    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


@dataclass(frozen=True)
class Migrated:
    """What one :func:`migrate` applied: numbered versions, then replaced functions."""

    versions: list[int] = field(default_factory=list)
    functions: list[str] = field(default_factory=list)


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


def load_functions(directory: Path = FUNCTIONS_DIR) -> list[Function]:
    """The function files in ``directory``, by name."""
    found = []
    for path in sorted(directory.glob("*.sql")):
        if _FUNCTION_PATTERN.match(path.stem) is None:
            raise DatabaseError(f"function file {path.name} must be named like the function: name.sql")
        found.append(Function(path.stem, path.read_text()))
    return found


def schema_level(migrations: list[Migration]) -> int:
    """The last numbered migration in ``migrations``: the schema level a library is at."""
    return max((m.version for m in migrations), default=0)


def migrate(
    database_url: str, migrations: list[Migration] | None = None, functions: list[Function] | None = None
) -> Migrated:
    """Apply DBOS's system-table migrations, then, in one transaction, every helix function
    that changed and every helix migration not yet recorded, and (re)install helix's
    triggers on DBOS's tables; return what was applied now.

    helix's tables live in the DBOS system database, next to DBOS's (see 004_dbos_sync.sql).
    """
    migrations = load_migrations() if migrations is None else migrations
    functions = load_functions() if functions is None else functions
    _migrate_dbos(database_url)
    try:
        with psycopg.connect(libpq_url(database_url), autocommit=True) as conn:
            conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_KEY,))
            try:
                with conn.transaction():
                    conn.execute(LOCK_DBOS_TABLES)
                    _create_bookkeeping(conn)
                    replaced = _apply_changed_functions(conn, functions, schema_level(migrations))
                    applied = _apply_pending(conn, migrations)
                    _check_bodies(conn, [f for f in functions if f.name in replaced])
                    conn.execute("SELECT helix.install_dbos_hooks()")
                return Migrated(applied, replaced)
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
    """Raise :class:`SchemaOutdatedError` unless every migration and function of this
    library has been applied.

    Only ``helix-dbos migrate`` and the executor (unless told not to) migrate; every
    other command checks with this and says what to run.
    """
    migrations = load_migrations()
    try:
        applied = set(applied_versions(database_url))
        stale = _stale_functions(database_url, load_functions(), schema_level(migrations)) if applied else []
        hooks = _installed_hooks(database_url) if applied else set()
    except psycopg.Error as exc:
        first = (str(exc).strip() or type(exc).__name__).splitlines()[0]
        raise DatabaseError(f"cannot read the helix schema of {redact(database_url)}: {first}") from None
    missing = [m.version for m in migrations if m.version not in applied]
    if not applied:
        problem = f"{redact(database_url)} has no helix schema"
    elif missing:
        problem = f"the helix schema of {redact(database_url)} is at version {max(applied)}, this library needs {max(missing)}"
    elif stale:
        problem = f"helix's functions in {redact(database_url)} are older than this library's ({_some(stale)})"
    elif hooks != set(HOOK_TRIGGERS):
        raise SchemaOutdatedError(
            f"helix's triggers on DBOS's tables are missing in {redact(database_url)} (was `dbos reset` run?):"
            " run `helix-dbos migrate --database-url URL`"
        )
    else:
        return
    raise SchemaOutdatedError(f"{problem}: run `helix-dbos migrate --database-url URL` first")


def _some(names: list[str], shown: int = 3) -> str:
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more} more" if more > 0 else "")


def _stale_functions(database_url: str, functions: list[Function], level: int) -> list[str]:
    """The functions :func:`migrate` would replace now."""
    with psycopg.connect(libpq_url(database_url)) as conn:
        exists = conn.execute("SELECT to_regclass('helix.schema_functions')").fetchone()
        recorded = _recorded_functions(conn) if exists is not None and exists[0] is not None else {}
    return [f.name for f in functions if _needs_applying(f, recorded.get(f.name), level)]


def _installed_hooks(database_url: str) -> set[str]:
    with psycopg.connect(libpq_url(database_url)) as conn:
        rows = conn.execute(
            "SELECT tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n"
            " ON n.oid = c.relnamespace WHERE n.nspname = 'dbos' AND tgname = ANY(%s)",
            (list(HOOK_TRIGGERS),),
        )
        return {row[0] for row in rows}


def _create_bookkeeping(conn: psycopg.Connection) -> None:
    conn.execute("CREATE SCHEMA IF NOT EXISTS helix")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS helix.schema_version ("
        " version integer PRIMARY KEY, name text NOT NULL,"
        " applied_at timestamptz NOT NULL DEFAULT now())"
    )
    conn.execute(
        "CREATE TABLE IF NOT EXISTS helix.schema_functions ("
        " name text PRIMARY KEY, checksum text NOT NULL, level integer NOT NULL,"
        " applied_at timestamptz NOT NULL DEFAULT now())"
    )


def _apply_changed_functions(conn: psycopg.Connection, functions: list[Function], level: int) -> list[str]:
    """Replace each function whose file changed, unless a library of a later level wrote it:
    a worker of the previous release that migrates during a rolling deploy must not put its
    functions back. ``level`` is the last numbered migration this library knows."""
    conn.execute("SET LOCAL check_function_bodies = off")
    recorded = _recorded_functions(conn)
    replaced = []
    for function in functions:
        if not _needs_applying(function, recorded.get(function.name), level):
            continue
        conn.execute(function.sql.encode())
        conn.execute(
            "INSERT INTO helix.schema_functions (name, checksum, level) VALUES (%s, %s, %s)"
            " ON CONFLICT (name) DO UPDATE SET checksum = EXCLUDED.checksum, level = EXCLUDED.level,"
            " applied_at = now()",
            (function.name, function.checksum, level),
        )
        replaced.append(function.name)
    return replaced


def _check_bodies(conn: psycopg.Connection, functions: list[Function]) -> None:
    """Create ``functions`` again with their bodies checked, now that the tables they use exist."""
    conn.execute("SET LOCAL check_function_bodies = on")
    for function in functions:
        conn.execute(function.sql.encode())


def _needs_applying(function: Function, recorded: tuple[str, int] | None, level: int) -> bool:
    """Whether ``function`` differs from what ran (``recorded``: its checksum and the level of
    the library that applied it) and that library was not of a later level."""
    if recorded is None:
        return True
    checksum, written_at = recorded
    return checksum != function.checksum and written_at <= level


def _recorded_functions(conn: psycopg.Connection) -> dict[str, tuple[str, int]]:
    """Each applied function's checksum and the level of the library that applied it."""
    rows = conn.execute("SELECT name, checksum, level FROM helix.schema_functions")
    return {name: (checksum, level) for name, checksum, level in rows}


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
