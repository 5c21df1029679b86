"""Everything helix installs on DBOS's tables, and the DBOS schemas it was tested with.

helix's tables live in DBOS's system database so that DBOS's own tools (``dbos workflow
cancel|resume|fork``, Conductor, ``DBOSClient``) and helix agree on a run, and so that an
answer's audit row and the DBOS message that delivers it commit in one transaction. Four
triggers on DBOS's tables are what those guarantees need, and nothing else of DBOS's is
written by helix:

=============================  ==========================  ==========================================
trigger                        on                          what it keeps
=============================  ==========================  ==========================================
``helix_follow_status``        ``dbos.workflow_status``    a run ends ``aborted`` / ``failed`` or
                               (AFTER UPDATE OF status)    reopens when DBOS's status changes
                                                           (``helix.follow_dbos_status``)
``helix_follow_new_workflow``  ``dbos.workflow_status``    ``helix.runs.workflow_id`` names a parked
                               (AFTER INSERT)              run's waiter or continuation
                                                           (``helix.follow_new_run_workflow``)
``helix_refuse_pickled_run``   ``dbos.workflow_status``    a helix workflow's input is portable JSON
                               (BEFORE INSERT)             (``helix.refuse_pickled``)
``helix_refuse_pickled_message`` ``dbos.notifications``    a message to a ``helix.*`` topic is
                               (BEFORE INSERT)             portable JSON (``helix.refuse_pickled``)
=============================  ==========================  ==========================================

They read these columns of DBOS's: ``workflow_status.workflow_uuid``, ``name``, ``status``,
``serialization``; ``notifications.topic``, ``serialization``; they never change a DBOS row.
helix reads, outside these triggers, ``dbos.workflow_status`` (a run's workflow status,
executor, version and queue; whether a workflow exists; prune's check for running
workflows) and ``dbos.application_versions`` (the latest version), and
``dbos.dbos_migrations`` here. Every other use of DBOS goes through its public API,
but for the private names in :mod:`helix_dbos.client.dbos_internals`.

A DBOS schema helix was not tested with is refused (:func:`require_tested_dbos`): a DBOS
upgrade that renames a column would otherwise leave a trigger failing inside DBOS's own
transactions. ``scripts/check_dbos_range.sh`` checks both ends of the declared range.

    >>> with psycopg.connect(url) as conn:          # doctest: +SKIP
    ...     install(conn)                           # after DBOS.migrate(url)
    ...     missing_hooks(conn)
    []
"""

from __future__ import annotations

import psycopg

from helix_dbos.errors import SchemaOutdatedError

TESTED_DBOS_SCHEMA_VERSIONS = frozenset({125})
"""``dbos.dbos_migrations.version`` of each DBOS release in the range ``pyproject.toml``
declares (3.4.x writes 125)."""

HOOKED_TABLES = ("dbos.workflow_status", "dbos.notifications")

LOCK_HOOKED_TABLES = f"LOCK TABLE {', '.join(HOOKED_TABLES)} IN SHARE ROW EXCLUSIVE MODE"
"""What ``migrate`` takes first: the DBOS tables that carry helix's triggers, in the mode that
installing the triggers takes anyway. A DBOS transaction writes one of them and then, in
helix's trigger, helix's tables; a migration that took helix's tables first could deadlock
with it."""

_RUN_WORKFLOWS = "('helix_agent_run', 'helix_await_answers')"

HOOKS: dict[str, str] = {
    "helix_follow_status": (
        "CREATE OR REPLACE TRIGGER helix_follow_status AFTER UPDATE OF status ON dbos.workflow_status"
        f" FOR EACH ROW WHEN (NEW.name IN {_RUN_WORKFLOWS} AND OLD.status IS DISTINCT FROM NEW.status)"
        " EXECUTE FUNCTION helix.follow_dbos_status()"
    ),
    "helix_follow_new_workflow": (
        "CREATE OR REPLACE TRIGGER helix_follow_new_workflow AFTER INSERT ON dbos.workflow_status"
        f" FOR EACH ROW WHEN (NEW.name IN {_RUN_WORKFLOWS})"
        " EXECUTE FUNCTION helix.follow_new_run_workflow()"
    ),
    "helix_refuse_pickled_run": (
        "CREATE OR REPLACE TRIGGER helix_refuse_pickled_run BEFORE INSERT ON dbos.workflow_status"
        f" FOR EACH ROW WHEN (NEW.name IN {_RUN_WORKFLOWS} AND NEW.serialization IS DISTINCT FROM 'portable_json')"
        " EXECUTE FUNCTION helix.refuse_pickled('helix_agent_run takes portable JSON input')"
    ),
    "helix_refuse_pickled_message": (
        "CREATE OR REPLACE TRIGGER helix_refuse_pickled_message BEFORE INSERT ON dbos.notifications"
        " FOR EACH ROW WHEN (NEW.topic LIKE 'helix.%' AND NEW.serialization IS DISTINCT FROM 'portable_json')"
        " EXECUTE FUNCTION helix.refuse_pickled('messages to helix topics must be portable JSON')"
    ),
}
"""Each trigger helix keeps on a DBOS table, by name, with the statement that installs it."""


def dbos_schema_version(conn: psycopg.Connection) -> int | None:
    """The version DBOS's migrations recorded in this database (None: no DBOS schema)."""
    if conn.execute("SELECT to_regclass('dbos.dbos_migrations')").fetchone() == (None,):
        return None
    row = conn.execute("SELECT version FROM dbos.dbos_migrations").fetchone()
    return None if row is None else int(row[0])


def require_tested_dbos(conn: psycopg.Connection) -> None:
    """Raise :class:`SchemaOutdatedError` (one line) unless DBOS's schema in this database
    is one this release of helix was tested with."""
    version = dbos_schema_version(conn)
    if version not in TESTED_DBOS_SCHEMA_VERSIONS:
        tested = ", ".join(str(v) for v in sorted(TESTED_DBOS_SCHEMA_VERSIONS))
        raise SchemaOutdatedError(
            f"DBOS's schema here is version {version}, and this helix-dbos was tested with {tested} only"
            " (see docs/upgrading.md)"
        )


def install(conn: psycopg.Connection) -> None:
    """(Re)create helix's triggers on DBOS's tables, in the caller's transaction. DBOS's
    tables must be there and of a tested version; a ``dbos reset`` or a DBOS migration that
    recreated a table is healed."""
    require_tested_dbos(conn)
    for statement in HOOKS.values():
        conn.execute(statement.encode())


def installed_hooks(conn: psycopg.Connection) -> set[str]:
    """The names of the triggers on ``dbos.*`` tables that are not DBOS's own (helix's, and
    any a user added)."""
    rows = conn.execute(
        "SELECT t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid"
        " JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = 'dbos' AND NOT t.tgisinternal AND t.tgname LIKE 'helix%'"
    )
    return {row[0] for row in rows}


def missing_hooks(conn: psycopg.Connection) -> list[str]:
    """The triggers of :data:`HOOKS` that are not installed."""
    return sorted(set(HOOKS) - installed_hooks(conn))
