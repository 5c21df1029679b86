"""Controlling a running session from anywhere: interrupt (durable flag, honoured after
the current step, even when set by another process), resume, and abort."""

from __future__ import annotations

import subprocess
import sys
import threading
from typing import Any

import pytest

from helix_dbos import define_agent
from helix_dbos._database import libpq_url
from runtime_testkit import (
    RESULT_TIMEOUT,
    Gate,
    assert_paired,
    call,
    calls,
    events,
    rows,
    session_status,
    text,
    tool_results,
    unique,
    use_model,
)

INTERRUPT_FROM_ANOTHER_PROCESS = """
import sys, psycopg
with psycopg.connect(sys.argv[1], autocommit=True) as conn:
    n = conn.execute(
        "UPDATE helix.sessions SET interrupt_requested = true WHERE id = %s AND status = 'active'", (sys.argv[2],)
    ).rowcount
sys.exit(0 if n == 1 else 3)
"""


def interrupt_from_another_process(executor: Any, session_id: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", INTERRUPT_FROM_ANOTHER_PROCESS, libpq_url(executor.database_url), session_id],
        capture_output=True, text=True, timeout=30,
    )
    assert done.returncode == 0, done.stderr


def test_interrupt_from_another_process_ends_the_run_after_its_current_step_and_resume_continues(executor):
    gate = Gate()
    agent = define_agent(unique("interrupt"), tools=[gate.tool()])
    mock = use_model(
        executor,
        calls(call("g1", "wait_here")),
        text("resumed and finished"),
    )
    handle = executor.execute(agent, "go")
    gate.wait_entered()
    interrupt_from_another_process(executor, handle.session_id)
    gate.open()

    result = handle.result(timeout=RESULT_TIMEOUT)
    assert (result.status, result.step_count, result.error) == ("interrupted", 1, None)
    assert len(mock.inputs) == 1  # no further step ran
    session = executor.get_session(handle.session_id)
    assert (session.status, session.stop_reason, session.step_count, session.interrupt_requested) == (
        "interrupted", "interrupted", 1, False
    )
    # The step that was running when the flag was set is committed whole.
    assert [m.role for m in session.messages] == ["user", "assistant", "tool"]
    assert_paired(session.messages)
    assert [e["type"] for e in events(executor, handle.session_id)][-2:] == ["step_finish", "interrupted"]
    assert [(r.run, r.status, r.stop_reason) for r in executor.list_runs(handle.session_id)] == [(1, "interrupted", "interrupted")]

    resumed = executor.resume(agent, handle.session_id)
    assert resumed.run == 2
    result = resumed.result(timeout=RESULT_TIMEOUT)
    assert (result.status, result.output, result.step_count) == ("completed", "resumed and finished", 2)
    # The resumed run saw the interrupted run's work, and no new user message.
    assert [m.role for m in mock.get_last_input().messages] == ["system", "user", "assistant", "tool"]
    assert [(r.run, r.kind, r.status) for r in executor.list_runs(handle.session_id)] == [
        (1, "execute", "interrupted"),
        (2, "resume", "completed"),
    ]
    assert gate.calls == 1


def test_interrupt_api_from_another_thread(executor):
    gate = Gate()
    agent = define_agent(unique("interrupt-api"), tools=[gate.tool()])
    use_model(executor, calls(call("g1", "wait_here")), calls(call("g2", "wait_here")), text("end"))
    handle = executor.execute(agent, "go")
    gate.wait_entered()
    answer: list[bool] = []
    worker = threading.Thread(target=lambda: answer.append(executor.interrupt(handle.session_id)))
    worker.start()
    worker.join(10)
    assert answer == [True]
    gate.open()
    result = handle.result(timeout=RESULT_TIMEOUT)
    assert (result.status, result.step_count) == ("interrupted", 1)
    resumed = executor.resume(agent, handle.session_id).result(timeout=RESULT_TIMEOUT)
    assert (resumed.status, resumed.output, resumed.step_count) == ("completed", "end", 3)
    messages = executor.get_session(handle.session_id).messages
    assert [m.tool_call_id for m in tool_results(messages)] == ["g1", "g2"]
    assert_paired(messages)


def test_interrupt_of_a_session_that_is_not_running_does_nothing(executor):
    agent = define_agent(unique("interrupt-idle"))
    use_model(executor, text("done"), text("again"))
    handle = executor.execute(agent, "go")
    handle.result(timeout=RESULT_TIMEOUT)
    assert executor.interrupt(handle.session_id) is False
    session = executor.get_session(handle.session_id)
    assert (session.status, session.interrupt_requested) == ("completed", False)
    # A later turn is not interrupted by a stale request.
    assert executor.execute(agent, "more", session_id=handle.session_id).result(timeout=RESULT_TIMEOUT).status == "completed"


def test_interrupt_during_the_final_step_lets_the_run_complete(executor):
    gate = Gate()
    agent = define_agent(unique("interrupt-last"), tools=[gate.tool("submit", finish_with=True)])
    use_model(executor, calls(call("s1", "submit")))
    handle = executor.execute(agent, "go")
    gate.wait_entered()
    assert executor.interrupt(handle.session_id) is True
    gate.open()
    result = handle.result(timeout=RESULT_TIMEOUT)
    assert (result.status, result.output) == ("completed", {"released": True})
    session = executor.get_session(handle.session_id)
    assert (session.status, session.interrupt_requested) == ("completed", False)


def test_result_timeout_raises_and_leaves_the_run_running(executor):
    gate = Gate()
    agent = define_agent(unique("timeout"), tools=[gate.tool()])
    use_model(executor, calls(call("g1", "wait_here")), text("done in the end"))
    handle = executor.execute(agent, "go")
    gate.wait_entered()
    with pytest.raises(TimeoutError, match="PENDING"):
        handle.result(timeout=0.1)
    assert session_status(executor, handle.session_id) == "active"
    gate.open()
    assert handle.result(timeout=RESULT_TIMEOUT).output == "done in the end"


def test_abort_cancels_the_run_and_the_session_says_aborted(executor):
    gate = Gate()
    agent = define_agent(unique("abort"), tools=[gate.tool()])
    mock = use_model(executor, calls(call("g1", "wait_here")), text("after resume"))
    handle = executor.execute(agent, "go")
    gate.wait_entered()
    assert executor.abort(handle.session_id, reason="user pressed stop") is True

    result = handle.result(timeout=RESULT_TIMEOUT)
    assert (result.status, result.output) == ("aborted", None)
    session = executor.get_session(handle.session_id)
    assert (session.status, session.error, session.stop_reason) == ("aborted", "user pressed stop", "aborted")
    assert [(r.run, r.status, r.error) for r in executor.list_runs(handle.session_id)] == [(1, "aborted", "user pressed stop")]
    assert events(executor, handle.session_id)[-1]["type"] == "aborted"
    assert executor.abort(handle.session_id) is False  # already over

    # Letting the tool return must not revive the cancelled run or commit its step.
    gate.open()
    assert gate.left.wait(10)
    assert handle.status() == "CANCELLED"
    threading.Event().wait(0.3)  # time enough for a (wrong) commit of the step
    session = executor.get_session(handle.session_id)
    assert (session.status, session.step_count) == ("aborted", 0)
    assert [m.role for m in session.messages] == ["user"]
    assert len(mock.inputs) == 1

    # An aborted session can be resumed: the aborted step is redone from its start.
    resumed = executor.resume(agent, handle.session_id)
    result = resumed.result(timeout=RESULT_TIMEOUT)
    assert (result.status, result.output) == ("completed", "after resume")
    messages = executor.get_session(handle.session_id).messages
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert_paired(messages)


def test_abort_of_a_session_that_is_not_running_does_nothing(executor):
    agent = define_agent(unique("abort-idle"))
    use_model(executor, text("done"))
    handle = executor.execute(agent, "go")
    handle.result(timeout=RESULT_TIMEOUT)
    assert executor.abort(handle.session_id) is False
    assert session_status(executor, handle.session_id) == "completed"
    assert rows(executor, "SELECT status FROM helix.runs WHERE session_num = helix.session_num(%(s)s)", s=handle.session_id) == [{"status": "completed"}]
