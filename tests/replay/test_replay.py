"""Runs a release recorded are resumed by this code and end with the same transcripts.

Each directory of ``tests/replay/fixtures/`` is a tagged release's recording
(``scripts/record_replay_fixtures.py``): its ``helix``, ``dbos`` and ``replay`` schemas
dumped right after a worker of that release was SIGKILLed with runs parked for an approval
and for a client's result, a run inside a tool with the step's other tool checkpointed, and a
parent waiting on a sub-agent that is inside a tool. For each, as an operator upgrading
does (docs/upgrading.md): the dump is loaded into a new database, this code's
``helix-dbos migrate`` runs, and a ``helix-dbos worker`` of this code with the same
application name and version and a new executor id starts; it adopts the dead worker's
lease and resumes its runs. The pending calls are answered, a completed session gets a
new message, and then:

- every session ends as it did when the recording release ran it to its end;
- every tool call that ran, ran to its end exactly once, and started twice only where the
  recording cut it (at-least-once for a call in flight, never for a checkpointed one);
- the model was called once per step: no step was done again.

Recording a release's fixtures when tagging it: docs/upgrading.md, "Checking a release".
"""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from replay_agents import APP_NAME, APP_VERSION, SCRIPTS
from replay_kit import (
    DUMP_FILE,
    EXPECTED_FILE,
    FIXTURES,
    LedgerRow,
    Worker,
    all_ended,
    cut_calls,
    give_answers,
    ledger,
    open_gate,
    outcomes,
    wait_until,
)

import helix_dbos
from helix_dbos import RunEnqueuer, admin, application_version
from helix_dbos._database import libpq_url
from helix_dbos._store.migrations import applied_versions, load_migrations

RECORDINGS = sorted(path for path in FIXTURES.iterdir() if path.is_dir())
SERVER_TOOLS = {"lookup", "long_job", "publish"}


def version_key(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def load_dump(url: str, path: Path) -> None:
    """Run the recorded plain-SQL dump in one transaction."""
    with psycopg.connect(libpq_url(url)) as conn:
        conn.execute(gzip.decompress(path.read_bytes()).decode())


def helix(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "helix_dbos", *args, "--database-url", url], capture_output=True,
                          text=True, timeout=120)


def settled(url: str, expected: dict[str, Any]) -> bool:
    """Whether every recorded session ended, after as many runs as in the recording."""
    if not all_ended(url, expected):
        return False
    return all(admin.show_session(url, sid).session.run_count == want["transcript"][-1]["run"]
               for sid, want in expected.items())


def test_every_release_has_a_dump_and_what_it_must_end_with() -> None:
    assert RECORDINGS, f"no recording in {FIXTURES}: run scripts/record_replay_fixtures.py"
    for path in RECORDINGS:
        assert re.fullmatch(r"\d+\.\d+\.\d+", path.name), f"{path.name} is not a release version"
        assert version_key(path.name) <= version_key(helix_dbos.__version__), f"{path.name} is newer than this code"
        assert sorted(p.name for p in path.iterdir()) == sorted([DUMP_FILE, EXPECTED_FILE]), path
        assert json.loads((path / EXPECTED_FILE).read_text())["helix_version"] == path.name


@pytest.mark.parametrize("recording", RECORDINGS, ids=[path.name for path in RECORDINGS])
def test_runs_of_a_release_finish_under_this_code(recording: Path, make_database: Callable[[], str]) -> None:
    plan = json.loads((recording / EXPECTED_FILE).read_text())
    assert plan["application_version"] == application_version(APP_NAME, APP_VERSION), (
        f"release {plan['helix_version']} ran these agents as DBOS version {plan['application_version']}, this code as"
        f" {application_version(APP_NAME, APP_VERSION)}: its workers cannot resume them (the workflow protocol"
        " changed, which needs a new major release; see docs/upgrading.md)"
    )
    url = make_database()
    load_dump(url, recording / DUMP_FILE)
    migrated = helix(url, "migrate")
    assert migrated.returncode == 0, migrated.stderr
    assert applied_versions(url) == [m.version for m in load_migrations()]  # upgraded in place to this code's schema
    before = ledger(url)
    open_gate(url)

    worker = Worker(url)
    try:
        new_id = worker.listening()
        give_answers(url, plan["answers"])
        with RunEnqueuer(url) as enqueuer:
            for item in plan["follow_ups"]:
                enqueuer.enqueue(item["agent"], item["message"], session_id=item["session"])
        wait_until(lambda: settled(url, plan["sessions"]), "every recorded session to end", timeout=120)
        workers = {w.executor_id: w for w in admin.list_workers(url)}
    finally:
        assert worker.stop() == 0, "\n".join(worker.errors[-30:])

    assert (workers[plan["recorded_executor"]].status, workers[plan["recorded_executor"]].adopted_by) == ("adopted", new_id)
    ended = outcomes(url)
    assert sorted(ended) == sorted(plan["sessions"])
    assert {admin.show_session(url, sid).session.owner for sid in plan["sessions"]} == {None}  # made without one
    for sid, want in plan["sessions"].items():
        assert ended[sid] == want, f"session {sid} ended otherwise: {admin.show_session(url, sid).session.error}"
    tools_ran_once(before, ledger(url), plan)
    steps_done_once(ledger(url), plan["sessions"])


def tools_ran_once(before: list[LedgerRow], after: list[LedgerRow], plan: dict[str, Any]) -> None:
    """Each server tool call of the transcripts ended once; it started twice only when the
    recording cut it, and a call checkpointed in the recording never started again."""
    cut = cut_calls(before)
    assert cut == plan["in_flight"]
    ran = {f"{sid}/{entry['message']['tool_call_id']}" for sid, session in plan["sessions"].items()
           for entry in session["transcript"]
           if entry["message"]["role"] == "tool" and entry["message"]["tool_name"] in SERVER_TOOLS
           and not entry["message"]["is_error"]}
    ends = Counter(key for kind, key, phase, _ in after if kind == "tool" and phase == "end")
    starts = Counter(key for kind, key, phase, _ in after if kind == "tool" and phase == "start")
    assert ends == Counter(ran)
    assert starts == Counter({key: 2 if key in cut else 1 for key in ran})


def steps_done_once(after: list[LedgerRow], sessions: dict[str, Any]) -> None:
    """The model was called once per assistant message of the transcripts, and never twice
    on the same transcript."""
    calls = Counter(key for kind, key, _, _ in after if kind == "llm")
    assert max(calls.values()) == 1, [key for key, n in calls.items() if n > 1]
    steps = sum(entry["message"]["role"] == "assistant" for s in sessions.values() for entry in s["transcript"])
    assert len(calls) == steps
    assert {key.split("/")[0] for key in calls} == set(SCRIPTS)
