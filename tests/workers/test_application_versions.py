"""Two DBOS applications on one database, the demo beside a user's worker, a version name
that another application owns (one line, no traceback), and a DBOS system database that is
not helix's (refused with a clear error)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import psycopg

from helix_dbos import application_version
from helix_dbos._database import libpq_url

APPS = Path(__file__).resolve().parents[1] / "apps"
HELIX = Path(sys.executable).with_name("helix-dbos")


def app_env(url: str, name: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HELIX_DATABASE_URL", "DBOS_SYSTEM_DATABASE_URL")}
    env.update(HELIX_APP_NAME=name, HELIX_APP_URL=url, PYTHONPATH=str(APPS), **extra)
    return env


def run_app(url: str, name: str, session_id: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(APPS / "named_app.py"), session_id], env=app_env(url, name, **extra),
                          capture_output=True, text=True, timeout=120)


def registered_versions(url: str) -> dict[str, str]:
    with psycopg.connect(libpq_url(url)) as conn:
        return dict(conn.execute("SELECT version_name, application_name FROM dbos.application_versions").fetchall())


def test_two_applications_share_one_database(migrated_url: str) -> None:
    for name, session in [("billing", "b-1"), ("support", "s-1"), ("billing", "b-2")]:
        done = run_app(migrated_url, name, session)
        assert done.returncode == 0, done.stderr[-2000:]
        assert json.loads(done.stdout.splitlines()[-1])["output"] == f"{name} says hi"
    assert registered_versions(migrated_url) == {application_version("billing"): "billing", application_version("support"): "support"}


def test_the_demo_and_a_users_worker_share_one_database(migrated_url: str, tmp_path: Path) -> None:
    demo = subprocess.run([str(HELIX), "demo", "--database-url", migrated_url], capture_output=True, text=True, timeout=180,
                          cwd=tmp_path)
    assert demo.returncode == 0, demo.stderr[-2000:]
    worker = subprocess.Popen([str(HELIX), "worker", "--app", "named_app:executor", "--executor-id", "w1"],
                              env=app_env(migrated_url, "myapp"), cwd=tmp_path, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        line = worker.stdout.readline() if worker.stdout else ""
        assert line.startswith("worker w1 listening"), (line, worker.stderr.read() if worker.poll() is not None else "")
    finally:
        worker.send_signal(signal.SIGTERM)
        out, err = worker.communicate(timeout=60)
    assert worker.returncode == 0, err[-2000:]
    assert "Traceback" not in err
    assert set(registered_versions(migrated_url)) == {application_version("helix-dbos"), application_version("myapp")}


def test_a_version_name_of_another_application_is_one_line(migrated_url: str, tmp_path: Path) -> None:
    assert run_app(migrated_url, "billing", "b-1").returncode == 0
    worker = subprocess.run([str(HELIX), "worker", "--app", "named_app:executor"], cwd=tmp_path, timeout=120,
                            env=app_env(migrated_url, "support", HELIX_APP_VERSION=application_version("billing")),
                            capture_output=True, text=True)
    assert worker.returncode == 1
    errors = [line for line in worker.stderr.splitlines() if " INFO helix_dbos: " not in line]  # not the worker's log
    assert len(errors) == 1 and errors[0].startswith("error: DBOS could not launch:"), worker.stderr
    assert "already registered by application" in worker.stderr


def test_a_dbos_system_database_apart_from_helix_is_refused(migrated_url: str, make_database: Callable[[], str]) -> None:
    elsewhere = make_database()
    done = run_app(migrated_url, "apart", "a-1", HELIX_APP_SYSTEM_URL=elsewhere)
    assert done.returncode == 1 and "ConfigurationError: helix's database is not DBOS's system database" in done.stderr
    with psycopg.connect(libpq_url(migrated_url)) as conn:
        assert conn.execute("SELECT count(*) FROM helix.sessions").fetchone() == (0,)


def helix(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(HELIX), *args, "--database-url", url], capture_output=True, text=True, timeout=120)


def test_a_run_stranded_by_a_deploy_is_shown_and_moved_to_the_new_version(migrated_url: str, tmp_path: Path) -> None:
    old = subprocess.Popen([sys.executable, str(APPS / "named_app.py"), "--gated", "st-1"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, env=app_env(migrated_url, "billing", HELIX_APP_VERSION="billing-v1"))
    assert old.stdout is not None and old.stdout.readline() == "waiting\n"
    old.send_signal(signal.SIGKILL)
    old.communicate(timeout=30)
    worker = subprocess.Popen([str(HELIX), "worker", "--app", "named_app:executor", "--executor-id", "v2"],
                              env=app_env(migrated_url, "billing", HELIX_APP_VERSION="billing-v2"), cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert worker.stdout is not None and worker.stdout.readline().startswith("worker v2 listening")
        shown = helix(migrated_url, "show", "st-1")
        assert "stranded run 1 waits for a worker of version billing-v1; the newest is billing-v2" in shown.stdout
        assert "helix-dbos move st-1 --to-version billing-v2" in shown.stdout

        moved = helix(migrated_url, "move", "st-1", "--to-version", "billing-v2", "--json")
        assert moved.returncode == 0, moved.stderr
        assert json.loads(moved.stdout)["run"] == 2
        deadline = time.monotonic() + 60
        while not (pending := json.loads(helix(migrated_url, "pending", "--session", "st-1", "--json").stdout)):
            assert time.monotonic() < deadline, "the moved run never reached its approval"
            time.sleep(0.1)
        assert [p["run"] for p in pending] == [2]
        assert helix(migrated_url, "approve", "st-1", pending[0]["tool_call_id"]).returncode == 0
        while (detail := json.loads(helix(migrated_url, "show", "st-1", "--json").stdout))["session"]["status"] != "completed":
            assert time.monotonic() < deadline, detail["session"]["status"]
            time.sleep(0.1)
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.communicate(timeout=60)
    runs = [(r["run"], r["status"], r["application_version"]) for r in detail["runs"]]
    assert runs == [(1, "aborted", "billing-v1"), (2, "completed", "billing-v2")]
    assert detail["session"]["output"] == "billing says hi"
