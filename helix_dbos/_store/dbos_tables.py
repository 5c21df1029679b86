"""Every statement helix runs on DBOS's tables, and the DBOS schemas it was tested with.

helix's tables live in DBOS's system database so that DBOS's own tools (``dbos workflow
cancel|resume|fork``, Conductor, ``DBOSClient``) and helix agree on a run, and so that an
answer's audit row and the DBOS message that delivers it commit in one transaction. This
module is the one place in helix that names a ``dbos.*`` table (a unit test holds it to
that); ``docs/architecture.md`` lists each use with the guarantee it serves.

Four triggers on DBOS's tables are what those guarantees need, and nothing of DBOS's is
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

helix never breaks DBOS's own writes: the two that follow DBOS catch any failure on
helix's side (``EXCEPTION WHEN OTHERS``, a WARNING naming the workflow), so DBOS's write
commits, and what they missed is made up later: ``helix.follow_run_workflow`` runs again
when DBOS changes the workflow's status and in the waiter's and continuation's first
transaction. The two that refuse pickled rows raise on purpose and write nothing of
helix's.
The reads below (SQL that :mod:`~helix_dbos._store.reads`, :mod:`~helix_dbos._store.writes`,
:mod:`~helix_dbos._store.retention` and :mod:`~helix_dbos._store.fleet` run) read
``dbos.workflow_status`` and ``dbos.application_versions``, and ``helix.claim_run`` reads a
workflow's queue through the function :data:`WORKFLOW_PLACEMENT` makes (with the triggers);
:func:`dbos_schema_version` reads ``dbos.dbos_migrations``. Every other use of DBOS goes through its public API, but
for the private names in :mod:`helix_dbos._client.dbos_internals`.

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

WORKFLOW_PLACEMENT = (
    "CREATE OR REPLACE FUNCTION helix.workflow_placement(wf text) RETURNS jsonb LANGUAGE sql STABLE AS $$"
    " SELECT jsonb_build_object('queue', queue_name) FROM dbos.workflow_status WHERE workflow_uuid = wf $$"
)
"""The function ``helix.claim_run`` asks where DBOS placed a run's workflow: ``{"queue": ...}``,
or NULL when DBOS does not know it in this database (helix's tables are apart from DBOS's)."""


# --- Reads of DBOS's tables -----------------------------------------------------------

DBOS_SCHEMA_EXISTS = "SELECT to_regclass('dbos.workflow_status') IS NOT NULL"
"""Whether DBOS's system tables are in this database (DBOS was launched on it)."""

WORKFLOW_EXISTS = "EXISTS (SELECT 1 FROM dbos.workflow_status WHERE workflow_uuid = {workflow_id})"
"""A condition: DBOS knows the workflow (``workflow_id``: the SQL of its id). A sub-agent's
session is claimed only while no run of it was queued, in the same transaction."""

WORKFLOW_RUNNING = (
    "EXISTS (SELECT 1 FROM dbos.workflow_status w"
    " WHERE w.workflow_uuid = {workflow_id} AND w.status IN ('PENDING', 'ENQUEUED'))"
)
"""A condition: the workflow is running or queued. Prune keeps a tree while one is."""

RUN_WORKFLOWS = (
    "SELECT w.workflow_uuid AS workflow_id, w.status AS workflow_status, w.executor_id, w.application_version,"
    " w.application_name,"
    " (SELECT version_name FROM dbos.application_versions v WHERE v.application_name = w.application_name"
    "   ORDER BY version_timestamp DESC LIMIT 1) AS latest_version"
    " FROM dbos.workflow_status w WHERE w.workflow_uuid = ANY (%(ids)s)"
)
"""Of each workflow in ``:ids``: its status, executor and version, and the latest version of
its application (what ``helix-dbos runs`` shows beside a run)."""

QUEUED_WORKFLOWS = (
    "SELECT queue_name, status, count(*) FROM dbos.workflow_status"
    " WHERE queue_name IS NOT NULL AND status IN ('ENQUEUED', 'PENDING') GROUP BY 1, 2"
)
"""Workflows queued or running, by queue and status (a fleet metric)."""


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
    """(Re)create helix's triggers on DBOS's tables and :data:`WORKFLOW_PLACEMENT`, in the
    caller's transaction. DBOS's
    tables must be there and of a tested version; a ``dbos reset`` or a DBOS migration that
    recreated a table is healed."""
    require_tested_dbos(conn)
    for statement in [*HOOKS.values(), WORKFLOW_PLACEMENT]:
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
