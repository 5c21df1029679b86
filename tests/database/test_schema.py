"""The helix schema: a baseline migration and additive ones, plain tables, and on DBOS's
tables only the documented triggers (``helix_dbos/_store/dbos_tables.py``).

``migrate`` on an empty database creates the baseline and applies the rest in one step;
the schema has no view and no INSTEAD OF trigger, and a step's commit fires no trigger on
helix's own tables (the one on ``helix.runs`` fires when a run ends); every trigger on a ``dbos.*`` table
that is not DBOS's own is on the documented list, and those that follow DBOS catch their
own failures; a DBOS schema helix was not tested with is refused with one line;
a migration is one transaction, and it waits for a DBOS transaction that is inside one of
helix's triggers instead of deadlocking with it.
"""

from __future__ import annotations

import concurrent.futures
import re
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from helix_dbos._database import libpq_url
from helix_dbos.errors import DatabaseError, SchemaOutdatedError
from helix_dbos._store import dbos_tables
from helix_dbos._store.migrations import Migration, check_schema, load_migrations, migrate

TABLES = {
    "companion_notices", "companions", "events", "messages", "pending_tool_calls", "run_adoptions", "runs", "schema_version",
    "sessions", "state_patches", "state_snapshots", "tool_attempts", "tool_call_answers", "tool_outcomes",
    "toolset_tools", "workers", "memories", "memory_spaces", "memory_embeddings",
}
MEMORY_TABLES = {"memories", "memory_spaces", "memory_embeddings"}
"""Agent memory belongs to its namespace, not to a session: a memory outlives the session
that wrote it (a prune), so ``memories.session_id`` names its writer by id, as provenance."""
DOCUMENTED_HOOKS = {
    ("workflow_status", "helix_follow_status"),
    ("workflow_status", "helix_follow_new_workflow"),
    ("workflow_status", "helix_refuse_pickled_run"),
    ("notifications", "helix_refuse_pickled_message"),
}


def fetch(url: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(libpq_url(url)) as conn:
        return conn.execute(sql, params).fetchall()


def test_migrate_creates_the_baseline_in_one_step(make_database: Callable[[], str]) -> None:
    url = make_database()
    assert [(m.version, m.name) for m in load_migrations()][0] == (1, "baseline")
    assert migrate(url).versions == [m.version for m in load_migrations()]
    tables = fetch(url, "SELECT table_name FROM information_schema.tables WHERE table_schema = 'helix'"
                        " AND table_type = 'BASE TABLE'")
    assert {t for (t,) in tables} == TABLES
    check_schema(url)


def test_the_schema_keeps_no_view_and_no_instead_of_trigger(database_url: str) -> None:
    assert fetch(database_url, "SELECT table_name FROM information_schema.views WHERE table_schema = 'helix'") == []
    instead = fetch(database_url, "SELECT trigger_name FROM information_schema.triggers"
                                  " WHERE trigger_schema = 'helix' AND action_timing = 'INSTEAD OF'")
    assert instead == []


def test_the_only_trigger_on_helix_tables_is_the_companion_notice_when_a_run_ends(database_url: str) -> None:
    found = fetch(
        database_url,
        "SELECT c.relname, t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid"
        " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'helix' AND NOT t.tgisinternal",
    )
    assert found == [("runs", "companion_notice")]


def test_every_table_names_a_session_by_its_number(database_url: str) -> None:
    """One key per session: a ``*session_num`` column (bigint) that references
    ``helix.sessions.num``; the text id is in ``helix.sessions.id`` alone."""
    columns = [c for c in fetch(database_url, "SELECT table_name, column_name, data_type FROM information_schema.columns"
                                              " WHERE table_schema = 'helix' AND column_name LIKE '%%session%%'")
               if c[0] not in MEMORY_TABLES]
    assert [c for c in columns if not c[1].endswith("session_num")] == []
    assert {c[2] for c in columns} == {"bigint"}
    by_table = {(t, c) for t, c, _ in columns}
    assert {t for t, _ in by_table} == TABLES - {"schema_version", "workers"} - MEMORY_TABLES
    references = fetch(
        database_url,
        "SELECT c.conrelid::regclass::text, a.attname, c.confrelid::regclass::text, f.attname"
        " FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace"
        " CROSS JOIN LATERAL unnest(c.conkey, c.confkey) AS k(col, fcol)"
        " JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.col"
        " JOIN pg_attribute f ON f.attrelid = c.confrelid AND f.attnum = k.fcol"
        " WHERE n.nspname = 'helix' AND c.contype = 'f' AND c.confrelid = 'helix.sessions'::regclass",
    )
    assert references and {(ref, key) for _, _, ref, key in references} == {("helix.sessions", "num")}
    unreferenced = {(f"helix.{t}", c) for t, c in by_table} - {(t, c) for t, c, _, _ in references}
    assert unreferenced == {  # they reference their pending call, their run
        ("helix.tool_call_answers", "session_num"), ("helix.run_adoptions", "session_num"),
        ("helix.toolset_tools", "session_num")}


def test_the_only_helix_triggers_on_dbos_tables_are_the_documented_ones(database_url: str) -> None:
    found = fetch(
        database_url,
        "SELECT c.relname, t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid"
        " JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_proc p ON p.oid = t.tgfoid"
        " JOIN pg_namespace pn ON pn.oid = p.pronamespace"
        " WHERE n.nspname = 'dbos' AND NOT t.tgisinternal AND pn.nspname = 'helix'",
    )
    assert set(found) == DOCUMENTED_HOOKS
    assert {name for _, name in DOCUMENTED_HOOKS} == set(dbos_tables.HOOKS)
    for name in dbos_tables.HOOKS:
        assert f"``{name}``" in (dbos_tables.__doc__ or ""), f"{name} is not on the module's list"


def test_every_helix_trigger_on_dbos_tables_that_writes_helix_s_tables_catches_its_own_failure(
    database_url: str,
) -> None:
    """A failure on helix's side must not abort DBOS's write (a WARNING instead); only the
    refusal of pickled rows raises, on purpose, and it writes nothing."""
    found = fetch(
        database_url,
        "SELECT t.tgname, p.proname, p.prosrc FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid"
        " JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_proc p ON p.oid = t.tgfoid"
        " JOIN pg_namespace pn ON pn.oid = p.pronamespace"
        " WHERE n.nspname = 'dbos' AND NOT t.tgisinternal AND pn.nspname = 'helix'",
    )
    unguarded = {
        name for name, function, source in found
        if function != "refuse_pickled" and not re.search(r"EXCEPTION\s+WHEN\s+OTHERS\s+THEN\s+RAISE\s+WARNING", source)
    }
    assert unguarded == set()
    assert {function for _, function, _ in found} == {"follow_dbos_status", "follow_new_run_workflow", "refuse_pickled"}


def test_check_schema_names_a_missing_hook_and_migrate_puts_it_back(make_database: Callable[[], str]) -> None:
    url = make_database()
    migrate(url)
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute("DROP TRIGGER helix_follow_status ON dbos.workflow_status")
    with pytest.raises(SchemaOutdatedError, match="triggers on DBOS's tables are missing"):
        check_schema(url)
    assert migrate(url).versions == []
    check_schema(url)


def test_migrate_refuses_a_dbos_schema_it_was_not_tested_with_in_one_line(make_database: Callable[[], str]) -> None:
    url = make_database()
    migrate(url)  # DBOS's tables, then helix's
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute("DROP SCHEMA helix CASCADE")
        conn.execute("UPDATE dbos.dbos_migrations SET version = version + 1000")
    with pytest.raises(SchemaOutdatedError) as refused:
        migrate(url)
    message = str(refused.value)
    assert "\n" not in message and "tested with" in message, message
    assert fetch(url, "SELECT to_regclass('helix.sessions')") == [(None,)], "nothing of helix's is written"


def next_version() -> int:
    """The number a migration after this library's last one takes."""
    return max(m.version for m in load_migrations()) + 1


def test_a_failing_migration_applies_nothing(make_database: Callable[[], str]) -> None:
    url = make_database()
    broken = [*load_migrations(), Migration(next_version(), "broken", "CREATE TABLE helix.fine (x int); SELECT 1/0;")]
    with pytest.raises(DatabaseError, match="division by zero"):
        migrate(url, migrations=broken)
    assert fetch(url, "SELECT to_regclass('helix.sessions'), to_regclass('helix.fine')") == [(None, None)]


def test_a_migration_waits_for_a_dbos_transaction_in_a_helix_trigger_instead_of_deadlocking(
    make_database: Callable[[], str],
) -> None:
    """DBOS updates ``dbos.workflow_status`` and then, in helix's trigger, reads helix's
    tables. A later migration that alters a helix table must take DBOS's hooked tables
    first, or each side waits for the other until Postgres aborts one."""
    url = make_database()
    migrate(url)
    later = [*load_migrations(), Migration(next_version(), "probe", "ALTER TABLE helix.sessions ADD COLUMN probe integer")]
    with psycopg.connect(libpq_url(url)) as dbos_tx:  # one transaction, as DBOS's are
        dbos_tx.execute("INSERT INTO dbos.workflow_status (workflow_uuid, status, name) VALUES ('wf', 'PENDING', 'x')")
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            migrating = pool.submit(migrate, url, later)
            deadline = time.monotonic() + 30
            while not fetch(url, "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                                 " AND wait_event_type = 'Lock'"):
                assert time.monotonic() < deadline, "the migration never waited for a lock"
                time.sleep(0.02)
            dbos_tx.execute("SELECT count(*) FROM helix.sessions")  # what helix's trigger reads
            dbos_tx.commit()
            assert migrating.result(timeout=60).versions == [next_version()]
