"""Crash test for persistent companions: the worker dies while two companions run.

``companion_worker.py`` runs a parent whose first step spawns a non-blocking companion
``n`` and then a blocking one ``b``; each one's tool writes a ledger line and takes
0.5 s. The worker is SIGKILLed once both are inside that tool, and a new worker with the
same executor id is launched on the same (per-case) database. Nothing may start twice:
each companion has one session, one run, one workflow; ``b``'s answer is the parent's
tool result once, and ``n``'s reaches the parent's transcript once, as its notice.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from helix_dbos._store.migrations import migrate
from helix_dbos.types import ToolResultMessage, UserMessage
from test_crash_subagents import assert_transcript_sound, kill_when_both_children_are_in_their_tool, ledger_lines, query

WORKER = Path(__file__).with_name("companion_worker.py")
SESSION = "companion-crash"
EXECUTOR_ID = "exec-companion-crash"


def start(url: str, mode: str, ledgers: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), url, SESSION, EXECUTOR_ID, mode, str(ledgers)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def test_worker_killed_while_companions_run_starts_nothing_twice_and_delivers_once(
    make_database: Callable[[], str], tmp_path: Path
) -> None:
    url = make_database()
    migrate(url)
    first = start(url, "start", tmp_path)
    kill_when_both_children_are_in_their_tool(first, tmp_path, labels=("n", "b"))

    second = start(url, "recover", tmp_path)
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err[-3000:]
    result = json.loads(out.strip().splitlines()[-1])
    assert (result["status"], result["output"]) == ("completed", "[companion n completed] n done"), result

    for name in ("n", "b"):
        child = f"{SESSION}-agent-{name}"
        assert query(url, "SELECT run, status FROM helix.runs WHERE session_num = helix.session_num(%s)", child) == [(1, "completed")]
        assert query(url, "SELECT workflow_uuid, status FROM dbos.workflow_status WHERE workflow_uuid LIKE %s",
                     f"helix:{child}:%") == [(f"helix:{child}:run:1", "SUCCESS")]
        assert query(url, "SELECT c.name, s.id FROM helix.companions c JOIN helix.sessions s ON s.num = c.child_session_num"
                     " WHERE c.session_num = helix.session_num(%s) AND c.name = %s",
                     SESSION, name) == [(name, child)]
        assert_transcript_sound(url, child)
        lines = ledger_lines(tmp_path, name)
        assert 1 <= len(lines) <= 2 and set(lines) == {f"{child} {name}"}, lines  # the tool: at least once

    messages = assert_transcript_sound(url, SESSION)
    spawned = {m.tool_call_id: json.loads(m.content) for m in messages if isinstance(m, ToolResultMessage)}
    assert spawned["s-n"] == {"name": "n", "sessionId": f"{SESSION}-agent-n", "status": "started"}
    assert spawned["s-b"] == {"name": "b", "sessionId": f"{SESSION}-agent-b", "status": "completed", "output": "b done"}
    notices = [m.content for m in messages if isinstance(m, UserMessage) and m.content.startswith("[companion")]
    assert notices == ["[companion n completed] n done"]
    [(name, run, delivered_step)] = query(
        url, "SELECT name, run, delivered_step FROM helix.companion_notices WHERE session_num = helix.session_num(%s)", SESSION)
    assert (name, run) == ("n", 1) and delivered_step == result["step_count"]  # the step that answered with it
    assert query(url, "SELECT run, status FROM helix.runs WHERE session_num = helix.session_num(%s)", SESSION) == [(1, "completed")]
