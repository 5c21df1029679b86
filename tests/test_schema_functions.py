"""helix's SQL functions live one to a file (``store/sql/functions/``) and ``migrate`` applies
a file whenever it changed, in the transaction that applies the numbered migrations; a
library of an earlier schema level never puts its functions back. Against a real Postgres."""

from __future__ import annotations

import concurrent.futures
import re
import time
from collections.abc import Callable

import psycopg
import pytest

from helix_dbos.database import libpq_url
from helix_dbos.errors import DatabaseError, SchemaOutdatedError
from helix_dbos.store.migrations import (
    FUNCTIONS_DIR,
    SCHEMA_DIR,
    Function,
    Migration,
    check_schema,
    load_functions,
    load_migrations,
    migrate,
    schema_level,
)

MIGRATIONS = load_migrations()
FUNCTIONS = load_functions()
LEVEL = schema_level(MIGRATIONS)


def fetch(url: str, sql: str, *args: object) -> list[tuple[object, ...]]:
    with psycopg.connect(libpq_url(url)) as conn:
        return [tuple(row) for row in conn.execute(sql, args)]


def function_source(url: str, name: str) -> str:
    [(source,)] = fetch(
        url, "SELECT prosrc FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
        " WHERE n.nspname = 'helix' AND p.proname = %s", name,
    )
    assert isinstance(source, str)
    return source


def schema_of(url: str) -> dict[str, list[tuple[object, ...]]]:
    """What a migrated database holds of helix: functions, columns, indexes, triggers and
    table options, each as Postgres prints it."""
    return {
        "functions": fetch(
            url, "SELECT p.proname, pg_get_functiondef(p.oid) FROM pg_proc p"
            " JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'helix' ORDER BY 1",
        ),
        "columns": fetch(
            url, "SELECT table_name, column_name, data_type, is_nullable, column_default"
            " FROM information_schema.columns WHERE table_schema = 'helix'"
            " ORDER BY 1, ordinal_position",
        ),
        "indexes": fetch(url, "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'helix' ORDER BY 1"),
        "triggers": fetch(
            url, "SELECT t.tgname, pg_get_triggerdef(t.oid) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname IN ('helix', 'dbos') AND NOT t.tgisinternal ORDER BY 1",
        ),
        "options": fetch(
            url, "SELECT c.relname, c.reloptions::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = 'helix' AND c.reloptions IS NOT NULL ORDER BY 1",
        ),
    }


def edited(name: str, marker: str) -> list[Function]:
    """Today's functions, with a comment ``marker`` added inside ``name``'s body."""
    return [
        Function(f.name, f.sql.replace("AS $$\n", f"AS $$\n-- {marker}\n", 1)) if f.name == name else f
        for f in FUNCTIONS
    ]


# --- the files --------------------------------------------------------------------------


def test_each_function_file_defines_the_function_it_is_named_after() -> None:
    assert len(FUNCTIONS) >= 18
    for function in FUNCTIONS:
        defined = re.findall(r"^CREATE OR REPLACE FUNCTION helix\.(\w+)\(", function.sql, re.MULTILINE)
        assert defined == [function.name], function.name


def test_no_numbered_migration_defines_a_function() -> None:
    """A function's text is in its own file only: changing it is an edit, not a copy."""
    for migration in MIGRATIONS:
        assert re.search(r"\bFUNCTION\s+helix\.", migration.sql.replace("EXECUTE FUNCTION", "")) is None, (
            migration.name
        )
    assert FUNCTIONS_DIR.parent == SCHEMA_DIR


# --- migrate ----------------------------------------------------------------------------


def test_a_fresh_install_records_every_function_at_the_library_level(make_database: Callable[[], str]) -> None:
    url = make_database()

    migrated = migrate(url)

    assert migrated.functions == [f.name for f in FUNCTIONS]
    assert fetch(url, "SELECT name, checksum, level FROM helix.schema_functions ORDER BY name") == [
        (f.name, f.checksum, LEVEL) for f in FUNCTIONS
    ]
    check_schema(url)


def test_a_changed_function_file_is_applied_once(make_database: Callable[[], str]) -> None:
    url = make_database()
    migrate(url)

    first = migrate(url, functions=edited("last_event_seq", "edited once"))
    second = migrate(url, functions=edited("last_event_seq", "edited once"))

    assert (first.versions, first.functions) == ([], ["last_event_seq"])
    assert (second.versions, second.functions) == ([], [])
    assert "-- edited once" in function_source(url, "last_event_seq")
    assert "-- edited once" not in function_source(url, "insert_events")


def test_an_earlier_library_leaves_newer_functions_alone(make_database: Callable[[], str]) -> None:
    """A worker of the previous release that migrates during a rolling deploy: its schema
    level is lower, so it applies neither its older function text nor anything else."""
    url = make_database()
    migrate(url, functions=edited("last_event_seq", "the newer release"))

    earlier = migrate(url, migrations=MIGRATIONS[:-1], functions=FUNCTIONS)

    assert (earlier.versions, earlier.functions) == ([], [])
    assert "-- the newer release" in function_source(url, "last_event_seq")


def test_check_schema_names_a_function_older_than_the_library(make_database: Callable[[], str]) -> None:
    url = make_database()
    migrate(url)
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute("UPDATE helix.schema_functions SET checksum = 'older' WHERE name = 'commit_step'")

    with pytest.raises(SchemaOutdatedError, match=r"helix's functions in .* are older than this library's \(commit_step\)"):
        check_schema(url)
    assert migrate(url).functions == ["commit_step"]
    check_schema(url)


def test_an_upgrade_through_the_numbered_migrations_ends_where_a_fresh_install_does(
    make_database: Callable[[], str],
) -> None:
    """Installs at an older version take today's functions first, then the migrations they
    miss: the schema they end with is a fresh install's, function for function. (An older
    install is made here with this library's migrations up to a cut; today's functions
    compile against the tables from version 8 on, where events got their key.)"""
    fresh = make_database()
    migrate(fresh)
    for cut in (8, 11, LEVEL - 1):
        old = make_database()
        migrate(old, migrations=[m for m in MIGRATIONS if m.version <= cut])

        upgraded = migrate(old)

        assert upgraded.versions == [m.version for m in MIGRATIONS if m.version > cut]
        assert schema_of(old) == schema_of(fresh), cut


def test_a_failing_migration_applies_nothing(make_database: Callable[[], str]) -> None:
    url = make_database()
    migrate(url, migrations=MIGRATIONS[:-1])
    broken = [*MIGRATIONS[:-1], Migration(LEVEL, "broken", "ALTER TABLE helix.no_such_table ADD COLUMN x int;")]

    with pytest.raises(DatabaseError, match="no_such_table"):
        migrate(url, migrations=broken, functions=edited("last_event_seq", "never applied"))

    assert "-- never applied" not in function_source(url, "last_event_seq")
    assert fetch(url, "SELECT max(version) FROM helix.schema_version") == [(LEVEL - 1,)]


def test_a_function_file_that_does_not_compile_fails_the_migration(make_database: Callable[[], str]) -> None:
    """Bodies are checked once the tables exist (a SQL function's references, a plpgsql
    function's statements): a typo fails ``migrate``, not a run."""
    url = make_database()
    migrate(url, migrations=MIGRATIONS[:-1])
    typo = [
        Function(f.name, f.sql.replace("ORDER BY seq DESC", "ORDER BY seq DESK", 1)) if f.name == "last_event_seq" else f
        for f in edited("insert_events", "never applied")
    ]

    with pytest.raises(DatabaseError, match="DESK"):
        migrate(url, functions=typo)

    assert "-- never applied" not in function_source(url, "insert_events")
    assert fetch(url, "SELECT max(version) FROM helix.schema_version") == [(LEVEL - 1,)]


def test_a_migration_waits_for_a_dbos_checkpoint_instead_of_deadlocking_with_it(
    make_database: Callable[[], str],
) -> None:
    """A DBOS checkpoint writes ``dbos.operation_outputs`` and then, in helix's trigger, reads
    ``helix.sessions``. A migration that alters ``helix.sessions`` (016) while a worker of the
    previous release checkpoints must wait for the DBOS tables first: it took them last, and
    each side waited for the other until Postgres aborted one."""
    url = make_database()
    migrate(url, migrations=[m for m in MIGRATIONS if m.version <= 15])
    with psycopg.connect(libpq_url(url)) as checkpoint:  # one transaction, as DBOS's are
        checkpoint.execute("INSERT INTO dbos.workflow_status (workflow_uuid, status, name) VALUES ('wf', 'PENDING', 'x')")
        checkpoint.execute("INSERT INTO dbos.operation_outputs (workflow_uuid, function_id, output) VALUES ('wf', 1, 'null')")
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            migrating = pool.submit(migrate, url)
            wait_until_blocked(url, "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                               " AND wait_event_type = 'Lock'")
            checkpoint.execute("SELECT count(*) FROM helix.sessions")  # what the trigger reads
            checkpoint.commit()
            assert migrating.result(timeout=60).versions == [m.version for m in MIGRATIONS if m.version > 15]


def wait_until_blocked(url: str, query: str, timeout: float = 30.0) -> None:
    """Return once ``query`` finds a backend waiting for a lock."""
    deadline = time.monotonic() + timeout
    while not fetch(url, query):
        assert time.monotonic() < deadline, "the migration never waited for a lock"
        time.sleep(0.02)
