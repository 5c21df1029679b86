"""The operator CLI (``helix-dbos pending/approve/.../fork``) and ``helix_dbos.admin``.

Runs happen in this process's DBOS (the session-scoped ``executor`` fixture); every
command runs in a NEW process that has only the database URL: no agent is imported and
DBOS is not launched there.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pydantic import BaseModel

from helix_dbos import MockLLMAdapter, ToolContext, define_agent, define_tool
from helix_dbos._database import libpq_url
from helix_dbos._store.migrations import load_migrations, migrate
from helix_dbos._store.statements import all_rows
from helix_dbos.types import AssistantMessage, Message, ToolSpec

HELIX = Path(sys.executable).with_name("helix-dbos")
RESULT_TIMEOUT = 20.0


# --- helpers ---------------------------------------------------------------------------------


def run_cli(url: str | None, *args: str, expect: int = 0) -> subprocess.CompletedProcess[str]:
    """``helix-dbos <args> [--database-url url]`` in a new process; check its exit code,
    and that a failure is one ``error:`` line on stderr (no traceback)."""
    command = [str(HELIX), *args] + (["--database-url", url] if url else [])
    proc = subprocess.run(command, capture_output=True, text=True, timeout=90)
    assert proc.returncode == expect, (
        f"helix-dbos {' '.join(args)} exited {proc.returncode}, expected {expect}\n"
        f"stdout: {proc.stdout}\nstderr: {proc.stderr}"
    )
    if expect == 1:
        assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1, proc.stderr
    if expect != 0:
        assert "Traceback" not in proc.stderr
    return proc


def unique(prefix: str) -> str:
    import uuid

    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def scripted(*steps: Any) -> Callable[[list[Message], list[ToolSpec]], Any]:
    """Answer model call n of a session (n = assistant messages so far) with steps[n]."""

    def respond(messages: list[Message], tools: list[ToolSpec]) -> Any:
        return steps[sum(isinstance(m, AssistantMessage) for m in messages)]

    return respond


def tool_calls(*items: tuple[str, str, dict[str, Any]]) -> dict[str, Any]:
    return {"type": "tool_calls", "tool_calls": [{"id": i, "name": n, "arguments": a} for i, n, a in items]}


def text(content: str) -> dict[str, Any]:
    return {"type": "text", "content": content}


def wait_for(predicate: Callable[[], Any], timeout: float = RESULT_TIMEOUT, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)
    return value


def rows(executor: Any, sql: str, **params: Any) -> list[dict[str, Any]]:
    with executor.pool.connection() as conn:
        return all_rows(conn, sql, params)


def status_of(executor: Any, session_id: str) -> str:
    return rows(executor, "SELECT status FROM helix.sessions WHERE id = %(id)s", id=session_id)[0]["status"]


class Notes(BaseModel):
    notes: list[str] = []


class Note(BaseModel):
    text: str


def save_note(args: Note, ctx: ToolContext) -> dict[str, Any]:
    ctx.update_state(lambda draft: draft.notes.append(args.text))
    return {"saved": args.text}


class Refund(BaseModel):
    amount: int


refunds: list[int] = []


def do_refund(args: Refund, ctx: ToolContext) -> dict[str, Any]:
    refunds.append(args.amount)
    return {"refunded": args.amount}


def note_agent() -> Any:
    tools = [
        define_tool("save_note", "Save a note.", Note, save_note),
        define_tool("refund", "Refund.", Refund, do_refund, require_approval=True),
    ]
    return define_agent(name=unique("ops"), system_prompt="x", tools=tools, state_schema=Notes)


def note(call_id: str, value: str) -> tuple[str, str, dict[str, Any]]:
    return (call_id, "save_note", {"text": value})


@pytest.fixture
def url(executor: Any) -> str:
    return str(executor.database_url)


@pytest.fixture
def waiting(executor: Any, url: str) -> Any:
    """A session that saved notes 'a' (step 1) and 'b' (step 2) and now waits for the
    approval of refund call 'r1' (step 3). Its run is answered by the test or here."""
    agent = note_agent()
    executor.llm = MockLLMAdapter(
        scripted(
            tool_calls(note("n1", "a")),
            tool_calls(note("n2", "b")),
            tool_calls(("r1", "refund", {"amount": 40})),
            text("all done"),
        )
    )
    handle = executor.execute(agent, "tidy up")
    wait_for(lambda: [p.tool_call_id for p in executor.list_pending(handle.session_id)] == ["r1"], what="r1 pending")
    waiter = f"{handle.workflow_id}:wait:3"  # the run parked: its step's waiter holds it now
    wait_for(lambda: executor.get_current_run(handle.session_id).workflow_id == waiter, what="the run parked")
    yield agent, handle
    if status_of(executor, handle.session_id) in ("awaiting_approval", "active"):
        run_cli(url, "abort", handle.session_id)


# --- imports and usage -------------------------------------------------------------------------


def test_the_cli_imports_neither_dbos_nor_litellm_nor_agents_to_start() -> None:
    script = (
        "import sys, json; from click.testing import CliRunner; from helix_dbos._cli import main;"
        "r = CliRunner().invoke(main, ['--help']); assert r.exit_code == 0, r.output;"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('dbos', 'litellm')"
        " or m.startswith('helix_dbos.llm') or m in ('helix_dbos.admin', 'helix_dbos.agents',"
        " 'helix_dbos._client.executor', 'helix_dbos._durable.workflow', 'helix_dbos._durable.loop'))))"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == []
    help_text = run_cli(None, "--help").stdout
    for command in ("pending", "approve", "deny", "submit", "sessions", "show", "state", "tail", "interrupt", "abort", "resume", "fork"):
        assert f"  {command} " in help_text


@pytest.mark.parametrize(
    "args",
    [
        ["approve", "s1"],  # missing the call id
        ["deny", "s1", "c1"],  # --reason is required
        ["submit", "s1", "c1"],  # neither --result nor --error
        ["submit", "s1", "c1", "--result", "{}", "--error", "x"],  # both
        ["submit", "s1", "c1", "--result", "{not json"],
        ["state", "s1", "--at-step", "-1"],
        ["fork", "s1"],  # --from-step is required
        ["sessions", "--limit", "0"],
        ["sessions", "--status", "bogus"],  # says which statuses there are, and lists nothing
        ["tail", "s1", "--from-seq", "x"],
        ["no-such-command"],
    ],
)
def test_bad_usage_exits_2(args: list[str]) -> None:
    proc = run_cli("postgresql://nobody@127.0.0.1:1/none", *args, expect=2)
    assert "Usage:" in proc.stderr or "Error:" in proc.stderr
    if "bogus" in args:
        assert "awaiting_approval" in proc.stderr and proc.stdout == ""


def test_unknown_sessions_exit_1_with_one_line(url: str) -> None:
    for args in (["show", "nope"], ["state", "nope"], ["tail", "nope", "--no-follow"], ["abort", "nope"], ["interrupt", "nope"],
                 ["resume", "nope"], ["fork", "nope", "--from-step", "0"], ["pending", "--session", "nope"],
                 ["approve", "nope", "c1"], ["submit", "nope", "c1", "--error", "x"]):
        assert run_cli(url, *args, expect=1).stderr == "error: no session 'nope'\n"


def test_an_unreachable_database_is_one_error_line() -> None:
    proc = run_cli("postgresql://nobody@127.0.0.1:1/none", "sessions", expect=1)
    assert "127.0.0.1" in proc.stderr or "connect" in proc.stderr.lower()


def test_only_migrate_changes_the_schema_the_others_say_to_run_it(make_database: Callable[[], str]) -> None:
    bare = make_database()
    for args in (["pending"], ["sessions"], ["show", "s1"], ["approve", "s1", "c1"], ["abort", "s1"], ["interrupt", "s1"]):
        proc = run_cli(bare, *args, expect=1)
        assert "has no helix schema: run `helix-dbos migrate --database-url URL` first" in proc.stderr
    with psycopg.connect(libpq_url(bare)) as conn:
        assert conn.execute("SELECT to_regnamespace('helix')").fetchone() == (None,)  # no DDL ran
    assert run_cli(bare, "migrate").stdout.startswith("applied migrations: 1")
    assert run_cli(bare, "pending").stdout == "no pending tool calls\n"


def test_a_schema_missing_newer_migrations_says_to_migrate(make_database: Callable[[], str]) -> None:
    older = make_database()
    migrate(older)
    *earlier, last = [m.version for m in load_migrations()]
    with psycopg.connect(libpq_url(older), autocommit=True) as conn:  # as a schema of the release before would
        conn.execute("DELETE FROM helix.schema_version WHERE version = %s", (last,))
    proc = run_cli(older, "sessions", expect=1)
    assert f"is at version {earlier[-1]}, this library needs {last}" in proc.stderr and "helix-dbos migrate" in proc.stderr


# --- reading ----------------------------------------------------------------------------------


def test_pending_show_sessions_and_state_while_a_run_waits(executor: Any, url: str, waiting: Any) -> None:
    agent, handle = waiting
    sid = handle.session_id

    listed = json.loads(run_cli(url, "pending", "--json").stdout)
    mine = [p for p in listed if p["session_id"] == sid]
    assert [(p["tool_call_id"], p["tool_name"], p["kind"], p["input"], p["step"]) for p in mine] == [
        ("r1", "refund", "approval", {"amount": 40}, 3)
    ]
    table = run_cli(url, "pending", "--session", sid).stdout.splitlines()
    assert table[0].split() == ["SESSION", "CALL", "TOOL", "KIND", "STEP", "REQUESTED", "DEADLINE", "INPUT"]
    assert table[1].split()[:5] == [sid, "r1", "refund", "approval", "3"] and table[1].endswith('{"amount":40}')

    shown = json.loads(run_cli(url, "show", sid, "--json").stdout)
    assert shown["session"]["status"] == "awaiting_approval"
    assert shown["session"]["step_count"] == 2
    assert shown["state"] == {"notes": ["a", "b"]}
    assert [(m["step"], m["message"]["role"]) for m in shown["transcript"]] == [
        (0, "user"), (1, "assistant"), (1, "tool"), (2, "assistant"), (2, "tool"),
    ]
    assert [r["status"] for r in shown["runs"]] == ["active"]
    assert [p["tool_call_id"] for p in shown["pending"]] == ["r1"]
    assert shown["usage"]["llm_calls"] == 2 and shown["usage"]["tool_calls"] == 2
    assert shown["children"] == [] and shown["answers"] == [] and shown["forked_from"] is None

    text_out = run_cli(url, "show", sid).stdout
    for expected in (f"session  {sid}", "status   awaiting_approval", "call save_note [n1]", "pending", "r1",
                     "usage    llm 2 calls"):
        assert expected in text_out, text_out

    assert json.loads(run_cli(url, "state", sid, "--json").stdout) == {"notes": ["a", "b"]}
    assert json.loads(run_cli(url, "state", sid, "--at-step", "1", "--json").stdout) == {"notes": ["a"]}
    assert json.loads(run_cli(url, "state", sid, "--at-step", "0").stdout) == {"notes": []}
    assert "there is no step 3" in run_cli(url, "state", sid, "--at-step", "3", expect=1).stderr

    listed_sessions = json.loads(run_cli(url, "sessions", "--status", "awaiting_approval", "--limit", "500", "--json").stdout)
    assert sid in [s["session_id"] for s in listed_sessions] and "id" not in listed_sessions[0]
    assert {s["status"] for s in listed_sessions} == {"awaiting_approval"}
    assert set(listed_sessions[0]) >= {"session_id", "agent_name", "status", "step_count", "run_count", "updated_at"}
    assert len(json.loads(run_cli(url, "sessions", "--limit", "1", "--json").stdout)) == 1
    assert sid in run_cli(url, "sessions", "--limit", "500").stdout

    run_cli(url, "approve", sid, "r1")
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    shown = json.loads(run_cli(url, "show", sid, "--json").stdout)
    assert shown["session"]["status"] == "completed" and shown["session"]["output"] == "all done"
    assert shown["pending"] == []
    assert [(a["tool_call_id"], a["approved"]) for a in shown["answers"]] == [("r1", True)]


def test_tail_prints_the_stream_and_follows_until_the_run_ends(executor: Any, url: str, waiting: Any) -> None:
    _, handle = waiting
    sid = handle.session_id

    lines = run_cli(url, "tail", sid, "--no-follow", "--json").stdout.splitlines()
    seen = [json.loads(line) for line in lines]
    assert [e["seq"] for e in seen] == list(range(1, len(seen) + 1))
    assert seen[0]["type"] == "run_start" and seen[-1]["type"] == "tool_approval_request"
    assert seen[-1]["data"]["tool_call_id"] == "r1"
    human = run_cli(url, "tail", sid, "--no-follow", "--from-seq", "2").stdout.splitlines()
    assert len(human) == len(seen) - 1 and human[0].split()[0] == "2"
    assert "tool_approval_request" in human[-1] and "refund [r1]" in human[-1]

    follower = subprocess.Popen(
        [str(HELIX), "tail", sid, "--from-seq", str(len(seen) + 1), "--json", "--database-url", url],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        time.sleep(1.5)
        assert follower.poll() is None, "tail --follow returned while the run was still waiting"
        run_cli(url, "approve", sid, "r1")
        out, err = follower.communicate(timeout=RESULT_TIMEOUT)
    finally:
        if follower.poll() is None:
            follower.kill()
    assert follower.returncode == 0, err
    followed = [json.loads(line) for line in out.splitlines()]
    assert followed[0]["seq"] == len(seen) + 1
    assert [e["type"] for e in followed][-1] == "finish"
    assert {"tool_result", "step_finish"} <= {e["type"] for e in followed}
    # A session with no run in progress: --follow prints what is there and returns.
    assert run_cli(url, "tail", sid).stdout.splitlines()[-1].split()[5] == "finish"


# --- abort and resume ---------------------------------------------------------------------------


def test_abort_then_resume_restarts_the_workflow_where_it_waited(executor: Any, url: str, waiting: Any) -> None:
    _, handle = waiting
    sid = handle.session_id
    waiter = f"{handle.workflow_id}:wait:3"
    refunds.clear()

    done = json.loads(run_cli(url, "abort", sid, "--json").stdout)
    assert done == {"session_id": sid, "run": 1, "workflow_id": waiter, "status": "aborted", "changed": True,
                    "enqueued_on": None}
    assert rows(executor, "SELECT status FROM dbos.workflow_status WHERE workflow_uuid = %(w)s", w=waiter) == [
        {"status": "CANCELLED"}
    ]
    run = rows(executor, "SELECT status, stop_reason, error FROM helix.runs WHERE session_num = helix.session_num(%(id)s)", id=sid)
    assert run == [{"status": "aborted", "stop_reason": "aborted", "error": "aborted by an operator"}]
    assert run_cli(url, "pending", "--session", sid).stdout == "no pending tool calls\n"
    assert "cancelled with its run" in run_cli(url, "approve", sid, "r1", expect=1).stderr
    assert "has no run in progress (status aborted)" in run_cli(url, "abort", sid, expect=1).stderr

    resumed = run_cli(url, "resume", sid).stdout
    assert resumed == f"resumed run 1 of session {sid} (workflow {waiter}); status awaiting_approval\n"
    assert [p["tool_call_id"] for p in json.loads(run_cli(url, "pending", "--session", sid, "--json").stdout)] == ["r1"]
    assert "is running" in run_cli(url, "resume", sid, expect=1).stderr

    run_cli(url, "approve", sid, "r1")
    wait_for(lambda: status_of(executor, sid) == "completed", what="the resumed run to complete")
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    assert refunds == [40]
    assert rows(executor, "SELECT status, end_step FROM helix.runs WHERE session_num = helix.session_num(%(id)s)", id=sid) == [
        {"status": "completed", "end_step": 4}
    ]
    types = [e["type"] for e in rows(executor, "SELECT type FROM helix.events WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %(id)s) ORDER BY seq", id=sid)]
    assert types.index("aborted") < types.index("resumed") < types.index("finish")
    assert "is completed; continue it with executor.execute" in run_cli(url, "resume", sid, expect=1).stderr


# --- fork ----------------------------------------------------------------------------------------


def test_fork_copies_transcript_and_state_after_step_n_and_a_worker_continues_it(executor: Any, url: str) -> None:
    agent = note_agent()
    executor.llm = MockLLMAdapter(scripted(tool_calls(note("n1", "a")), tool_calls(note("n2", "b")), text("first")))
    source = executor.execute(agent, "take notes")
    assert source.result(timeout=RESULT_TIMEOUT).status == "completed"
    sid = source.session_id

    created = json.loads(run_cli(url, "fork", sid, "--from-step", "1", "--json").stdout)
    fid = created["session_id"]
    assert fid != sid
    assert (created["status"], created["step_count"], created["run_count"], created["agent_name"]) == (
        "interrupted", 1, 0, agent.name,
    )
    shown = json.loads(run_cli(url, "show", fid, "--json").stdout)
    source_shown = json.loads(run_cli(url, "show", sid, "--json").stdout)
    assert [m["message"] for m in shown["transcript"]] == [
        m["message"] for m in source_shown["transcript"] if m["step"] <= 1
    ]
    assert shown["state"] == {"notes": ["a"]}
    assert shown["forked_from"] == {"session_id": sid, "step": 1}
    assert shown["runs"] == [] and shown["usage"]["llm_calls"] == 0
    assert json.loads(run_cli(url, "state", fid, "--at-step", "0", "--json").stdout) == {"notes": []}
    assert f"forked   from {sid} at step 1" in run_cli(url, "show", fid).stdout
    refused = run_cli(url, "resume", fid, expect=1).stderr
    assert f"executor.resume('{agent.name}', '{fid}')" in refused
    assert "cannot fork from step 9" in run_cli(url, "fork", sid, "--from-step", "9", expect=1).stderr
    human = run_cli(url, "fork", sid, "--from-step", "0").stdout
    assert human.startswith(f"forked session {sid} after step 0 into ") and "executor.resume(" in human

    # A worker continues the fork: its next step sees exactly what the source's step 2 saw.
    mock = MockLLMAdapter(scripted(tool_calls(note("n1", "a")), tool_calls(note("x2", "c")), text("forked")))
    executor.llm = mock
    result = executor.resume(agent, fid).result(timeout=RESULT_TIMEOUT)
    assert (result.status, result.output, result.step_count) == ("completed", "forked", 3)
    first_input = [m.model_dump(mode="json", exclude_none=True) for m in mock.inputs[0].messages if m.role != "system"]
    assert first_input == [m["message"] for m in source_shown["transcript"] if m["step"] <= 1]
    assert json.loads(run_cli(url, "state", fid, "--json").stdout) == {"notes": ["a", "c"]}
    assert json.loads(run_cli(url, "state", sid, "--json").stdout) == {"notes": ["a", "b"]}  # source untouched
    assert len(json.loads(run_cli(url, "show", sid, "--json").stdout)["transcript"]) == len(source_shown["transcript"])
