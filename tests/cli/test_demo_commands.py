"""After the demo: it ends by printing the commands that show its session, and those
commands work as printed, from a shell where the virtualenv is not on PATH. On the
embedded Postgres they use ``helix-dbos --embedded``, which starts the demo's server for
the command's lifetime; with a URL they carry it. ``python -m helix_dbos`` is the same
command."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from postmaster import server_running, stop_postmaster

CLI = Path(sys.executable).parent / "helix-dbos"
VERBS = ("show", "tail", "state", "sessions")
DATABASE_ENV_VARS = ("HELIX_DATABASE_URL", "DBOS_SYSTEM_DATABASE_URL", "HELIX_EMBEDDED_PGDATA", "HELIX_TEST_DATABASE_URL")


def outside_the_venv() -> dict[str, str]:
    """A reader's shell: no database setting, and the virtualenv's bin/ not on PATH."""
    env = {key: value for key, value in os.environ.items() if key not in DATABASE_ENV_VARS}
    env["PATH"] = "/usr/bin:/bin"
    env.pop("VIRTUAL_ENV", None)
    return env


def run(args: list[str], cwd: Path, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=timeout)


def printed_commands(stdout: str) -> tuple[str, list[list[str]], list[str]]:
    """The demo's session id, the commands it printed last (as argv lists) and the notes after them."""
    lines = stdout.splitlines()
    session_id = lines[0].removeprefix("session ")
    start = lines.index("Look at what the demo did:")
    commands = [shlex.split(line) for line in lines[start + 1:] if line.startswith("  ")]
    notes = [line for line in lines[start + 1:] if not line.startswith("  ")]
    return session_id, commands, notes


def check_the_commands_show_the_session(session_id: str, commands: list[list[str]], cwd: Path,
                                        env: dict[str, str]) -> None:
    verbs = [next((w for w in VERBS if w in command), None) for command in commands]
    assert verbs == list(VERBS), commands
    outputs = {}
    for verb, command in zip(verbs, commands):
        done = run(command, cwd, env)
        assert done.returncode == 0, (command, done.stdout, done.stderr)
        outputs[verb] = done.stdout
    assert outputs["show"].splitlines()[0] == f"session  {session_id}"
    assert "status   completed" in outputs["show"]
    assert "call save_note [n1]" in outputs["show"]
    assert outputs["tail"].splitlines()[-1].split()[5] == "finish"  # "   18  run 1  step 3   finish  output ..."
    assert len(json.loads(outputs["state"])["notes"]) == 2
    assert any(line.startswith(session_id) and "completed" in line for line in outputs["sessions"].splitlines())


def test_the_demo_on_the_embedded_postgres_prints_commands_that_work(tmp_path: Path) -> None:
    env = outside_the_venv()
    pgdata = tmp_path / ".helix" / "pgdata"  # the default, relative to the directory the demo ran in
    try:
        demo = run([str(CLI), "demo"], tmp_path, env, timeout=300)
        assert demo.returncode == 0, demo.stdout + demo.stderr
        assert not server_running(pgdata), f"the embedded server outlived the demo:\n{demo.stderr[-3000:]}"
        session_id, commands, notes = printed_commands(demo.stdout)

        assert all(c[:2] == [str(CLI), "--embedded"] for c in commands), commands  # not on PATH: its path
        assert f"Run them from {tmp_path}: --embedded starts the embedded Postgres in .helix/pgdata for each command." in notes
        assert any("not on your PATH" in note and f"source {CLI.parent}/activate" in note for note in notes), notes

        check_the_commands_show_the_session(session_id, commands, tmp_path, env)
        assert not server_running(pgdata), "an --embedded command left the server running"
    finally:
        stop_postmaster(pgdata)


def test_python_m_helix_dbos_runs_the_demo_and_prints_commands_with_its_url(
    tmp_path: Path, make_database: Callable[[], str]
) -> None:
    url = make_database()
    env = outside_the_venv()
    demo = run([sys.executable, "-m", "helix_dbos", "demo", "--database-url", url], tmp_path, env, timeout=300)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    session_id, commands, _ = printed_commands(demo.stdout)

    assert all(c[:3] == [sys.executable, "-m", "helix_dbos"] and c[-2:] == ["--database-url", url] for c in commands)
    check_the_commands_show_the_session(session_id, commands, tmp_path, env)
    assert not (tmp_path / ".helix").exists()  # no embedded server was involved


def test_embedded_refuses_a_directory_where_the_demo_never_ran(tmp_path: Path) -> None:
    done = run([str(CLI), "--embedded", "sessions"], tmp_path, outside_the_venv())

    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.startswith(f"error: no embedded Postgres in {tmp_path / '.helix' / 'pgdata'}: run helix-dbos demo")
    assert len(done.stderr.splitlines()) == 1
    assert not (tmp_path / ".helix").exists()  # nothing was created


def test_no_database_says_how_to_use_the_embedded_one(tmp_path: Path) -> None:
    done = run([str(CLI), "sessions"], tmp_path, outside_the_venv())

    assert done.returncode == 1
    assert "no database configured" in done.stderr and "helix-dbos --embedded COMMAND" in done.stderr
