"""Crash test for sub-agents: the worker dies while two children run in parallel.

``subagent_worker.py`` runs a parent that starts two children (DBOS child workflows);
each child's tool writes a ledger line and then takes 0.5 s. The worker is SIGKILLed
once both children are inside that tool, and a new worker with the same executor id
is launched on the same (per-case) database. DBOS recovers the parent and both
children; the parent must complete with each child started, run and committed exactly
once.

The children's tool itself is at-least-once: it was running when the process died, its
step had no checkpoint, so the recovered child runs it again. Its ledger therefore has
one or two lines; what must be exactly-once is the child session, its run, and every
committed result.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

from helix_dbos._database import libpq_url
from helix_dbos.orchestration import unpaired_tool_call_ids
from helix_dbos._store.migrations import migrate
from helix_dbos.types import MessageAdapter, ToolResultMessage

WORKER = Path(__file__).with_name("subagent_worker.py")
SESSION = "sub-crash"
EXECUTOR_ID = "exec-sub-crash"
CHILDREN = {"c1": "a", "c2": "b"}


def start(url: str, mode: str, ledgers: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), url, SESSION, EXECUTOR_ID, mode, str(ledgers)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def ledger_lines(ledgers: Path, label: str) -> list[str]:
    path = ledgers / f"ledger_{label}.txt"
    return path.read_text().splitlines() if path.exists() else []


def kill_when_both_children_are_in_their_tool(
    proc: subprocess.Popen[str], ledgers: Path, timeout: float = 60, labels: tuple[str, ...] = tuple(CHILDREN.values())
) -> None:
    deadline = time.monotonic() + timeout
    while not all(ledger_lines(ledgers, label) for label in labels):
        if proc.poll() is not None:
            raise AssertionError(f"the worker ended before both children started:\n{proc.communicate()[1][-3000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("the children never reached their tool")
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL


def query(url: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(libpq_url(url)) as conn:
        return conn.execute(sql, params).fetchall()


def test_worker_killed_while_two_children_run_recovers_each_child_exactly_once(
    make_database: Callable[[], str], tmp_path: Path
) -> None:
    url = make_database()  # one database per case: a recovering worker may take any run on it
    migrate(url)
    child_ids = {call_id: f"{SESSION}-sub-{call_id}" for call_id in CHILDREN}

    first = start(url, "start", tmp_path)
    kill_when_both_children_are_in_their_tool(first, tmp_path)

    # The kill landed inside both children's first step: nothing of it is committed.
    at_kill = dict(query(url, "SELECT id, step_count FROM helix.sessions WHERE parent_session_num = helix.session_num(%s)", SESSION))
    assert at_kill == {child_ids["c1"]: 0, child_ids["c2"]: 0}
    assert query(url, "SELECT status, step_count FROM helix.sessions WHERE id = %s", SESSION) == [("active", 0)]

    second = start(url, "recover", tmp_path)
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err[-3000:]
    result = json.loads(out.strip().splitlines()[-1])

    assert (result["status"], result["step_count"]) == ("completed", 2), result
    assert result["output"] == 'parent: child a got {"worked":"a"} | child b got {"worked":"b"}'

    # Each child session exists once, under the parent, and completed.
    sessions = query(
        url, "SELECT s.id, s.status, s.step_count, s.run_count, r.id FROM helix.sessions s"
        " JOIN helix.sessions r ON r.num = s.root_session_num"
        " WHERE s.parent_session_num = helix.session_num(%s) ORDER BY s.id", SESSION,
    )
    assert sessions == [(child_ids[c], "completed", 2, 1, SESSION) for c in sorted(CHILDREN)]
    for call_id, label in CHILDREN.items():
        child_id = child_ids[call_id]
        assert query(url, "SELECT run, status FROM helix.runs WHERE session_num = helix.session_num(%s)", child_id) == [(1, "completed")]
        event_types = [r[0] for r in query(url, "SELECT type FROM helix.events WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %s) ORDER BY seq", child_id)]
        assert event_types.count("run_start") == 1 and event_types.count("finish") == 1, event_types
        assert event_types.count("tool_result") == 1, event_types
        assert_transcript_sound(url, child_id)
        # One DBOS workflow per child, ended once.
        assert query(url, "SELECT status FROM dbos.workflow_status WHERE workflow_uuid LIKE %s",
                     f"helix:{child_id}:%") == [("SUCCESS",)]
        # At-least-once inside the interrupted tool step: the tool ran before the kill and
        # may have run again on recovery, never more.
        lines = ledger_lines(tmp_path, label)
        assert 1 <= len(lines) <= 2 and set(lines) == {f"{child_id} {label}"}, lines

    # The parent: one run, both results once, in call order, nothing unpaired.
    assert query(url, "SELECT run, status FROM helix.runs WHERE session_num = helix.session_num(%s)", SESSION) == [(1, "completed")]
    messages = assert_transcript_sound(url, SESSION)
    results = [m for m in messages if isinstance(m, ToolResultMessage)]
    assert [(r.tool_call_id, r.is_error, json.loads(r.content)) for r in results] == [
        ("c1", False, 'child a got {"worked":"a"}'),
        ("c2", False, 'child b got {"worked":"b"}'),
    ]
    parent_events = [r[0] for r in query(url, "SELECT type FROM helix.events WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %s) ORDER BY seq", SESSION)]
    assert parent_events.count("subagent_start") == 2 and parent_events.count("subagent_finish") == 2, parent_events
    assert parent_events.count("finish") == 1


def assert_transcript_sound(url: str, session_id: str) -> list[Any]:
    rows = query(url, "SELECT seq, message FROM helix.messages WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %s) ORDER BY seq", session_id)
    assert [r[0] for r in rows] == list(range(len(rows))), f"{session_id}: message seqs have a gap or a duplicate"
    messages = [MessageAdapter.validate_python(r[1]) for r in rows]
    assert unpaired_tool_call_ids(messages) == [], f"{session_id}: a tool call without a result"
    ids = [m.tool_call_id for m in messages if isinstance(m, ToolResultMessage)]
    assert len(ids) == len(set(ids)), f"{session_id}: a tool result recorded twice: {ids}"
    return messages
