"""Client-executed tools: the run waits for a result submitted from ANOTHER
process, with the CLI or with ``helix_dbos.admin`` in a bare ``python -c``."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

from pydantic import BaseModel

from helix_dbos import AgentHooks, define_agent, define_tool
from runtime_testkit import (
    cli,
    RESULT_TIMEOUT,
    assert_paired,
    call,
    calls,
    events,
    result_for,
    rows,
    session_status,
    text,
    unique,
    use_model,
    wait_for,
)

class Question(BaseModel):
    question: str


class Answer(BaseModel):
    answer: str


ask_user = define_tool("ask_user", "Ask the user a question.", Question, "client", output_schema=Answer)


def client_agent(prefix: str, **options: Any) -> Any:
    return define_agent(name=unique(prefix), system_prompt="x", tools=[ask_user], **options)


def ask(call_id: str, question: str = "favourite colour?") -> dict[str, Any]:
    return call(call_id, "ask_user", {"question": question})


def wait_pending(executor: Any, session_id: str, ids: list[str]) -> None:
    wait_for(
        lambda: sorted(p.tool_call_id for p in executor.list_pending(session_id)) == sorted(ids),
        timeout=RESULT_TIMEOUT,
        what=f"pending calls {ids}",
    )


def test_a_client_result_becomes_the_tool_result_and_the_wait_is_usage(executor: Any) -> None:
    log: list[tuple[Any, ...]] = []
    hooks = AgentHooks(
        on_agent_suspended=lambda reason, ids, ctx: log.append(("suspended", reason, tuple(ids))),
        on_agent_resumed=lambda reason, ctx: log.append(("resumed", reason)),
    )
    agent = client_agent("client", hooks=hooks)
    mock = use_model(executor, calls(ask("c1")), text("blue it is"))
    handle = executor.execute(agent, "go")
    sid = handle.session_id
    wait_pending(executor, sid, ["c1"])

    shown = json.loads(cli(executor, "show", sid, "--json").stdout)
    assert shown["session"]["status"] == "awaiting_client_tool"
    assert [(p["tool_call_id"], p["kind"]) for p in shown["pending"]] == [("c1", "client")]
    assert log == [("suspended", "awaiting_client_tool", ("c1",))]
    assert "tool_start" in [e["type"] for e in events(executor, sid)]
    time.sleep(0.3)  # a measurable wait

    out = json.loads(cli(executor, "submit", sid, "c1", "--result", '{"answer": "blue"}', "--json").stdout)
    assert out["status"] == "accepted"
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    messages = executor.get_session(sid).messages
    assert_paired(messages)
    answered = result_for(messages, "c1")
    assert (answered.content, answered.is_error) == ('{"answer":"blue"}', False)
    assert answered in mock.get_last_input().messages
    assert log == [("suspended", "awaiting_client_tool", ("c1",)), ("resumed", "awaiting_client_tool")]

    [wait] = rows(
        executor,
        "SELECT step, name, ms, success FROM helix.session_usage(%(id)s) WHERE source = 'client_tool_wait'",
        id=sid,
    )
    assert (wait["step"], wait["name"], wait["success"]) == (1, "ask_user", True)
    assert 300 <= wait["ms"] < 60_000
    assert executor.get_usage(sid).client_tool_wait_ms == wait["ms"]
    [audit] = rows(executor, "SELECT kind, answer FROM helix.tool_call_answers WHERE session_num = helix.session_num(%(id)s)", id=sid)
    assert audit["kind"] == "client" and audit["answer"]["result"] == {"answer": "blue"}


def test_a_client_error_becomes_the_error_result(executor: Any) -> None:
    agent = client_agent("clienterr")
    use_model(executor, calls(ask("c1")), text("the user left"))
    handle = executor.execute(agent, "go")
    wait_pending(executor, handle.session_id, ["c1"])

    cli(executor, "submit", handle.session_id, "c1", "--error", "the user closed the dialog")
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    failed = result_for(executor.get_session(handle.session_id).messages, "c1")
    assert (failed.content, failed.is_error) == ("the user closed the dialog", True)
    [audit] = rows(
        executor, "SELECT reason, answer FROM helix.tool_call_answers WHERE session_num = helix.session_num(%(id)s)", id=handle.session_id
    )
    assert audit["reason"] == "the user closed the dialog" and audit["answer"]["error"] == "the user closed the dialog"


def test_a_result_that_breaks_the_output_schema_is_refused_and_the_run_keeps_waiting(executor: Any) -> None:
    agent = client_agent("clientbad")
    use_model(executor, calls(ask("c1")), text("done"))
    handle = executor.execute(agent, "go")
    sid = handle.session_id
    wait_pending(executor, sid, ["c1"])

    bad = cli(executor, "submit", sid, "c1", "--result", '{"answer": 3}', expect=1)
    assert "does not match the tool's output schema at answer" in bad.stderr
    assert session_status(executor, sid) == "awaiting_client_tool"
    assert [p.tool_call_id for p in executor.list_pending(sid)] == ["c1"]
    assert rows(executor, "SELECT 1 FROM helix.tool_call_answers WHERE session_num = helix.session_num(%(id)s)", id=sid) == []

    # A valid one, through the Python admin API in a bare interpreter (no agent, no DBOS launched).
    script = (
        "import sys; from helix_dbos import admin;"
        "print(admin.submit(sys.argv[1], sys.argv[2], 'c1', result={'answer': 'green'}).status);"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('litellm',) or m == 'helix_dbos._client.executor'))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, executor.database_url, sid], capture_output=True, text=True, timeout=90
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["accepted", "[]"]
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    assert result_for(executor.get_session(sid).messages, "c1").content == '{"answer":"green"}'


def test_an_unanswered_client_call_times_out(executor: Any) -> None:
    slow = define_tool("ask_user", "Ask.", Question, "client", output_schema=Answer, client_timeout=0.5)
    agent = define_agent(name=unique("clientslow"), system_prompt="x", tools=[slow])
    use_model(executor, calls(ask("c1")), text("no answer"))
    handle = executor.execute(agent, "go")
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    timed_out = result_for(executor.get_session(handle.session_id).messages, "c1")
    assert (timed_out.content, timed_out.is_error) == ("Tool call c1 timed out waiting for the client's result", True)
    [wait] = rows(
        executor, "SELECT success, ms FROM helix.session_usage(%(id)s) WHERE source = 'client_tool_wait'",
        id=handle.session_id,
    )
    assert wait["success"] is False and wait["ms"] >= 500
    assert "it timed out" in cli(executor, "submit", handle.session_id, "c1", "--result", '{"answer": "x"}', expect=1).stderr
