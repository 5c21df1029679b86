"""Sessions and runs: turns, busy sessions, idempotent starts, continuing a
completed structured-output session, the legacy ``__finish__`` heal, and bad input."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from dbos import DBOS, SetWorkflowID
from pydantic import BaseModel

from helix_dbos import (
    AgentNotRegisteredError,
    HelixError,
    MockLLMAdapter,
    SessionBusyError,
    SessionNotFoundError,
    ToolContext,
    define_agent,
    tool,
)
from helix_dbos._client import commands
from helix_dbos._durable import workflow
from helix_dbos._durable.payloads import RunRequest, run_workflow_id
from helix_dbos._durable.run_claim import claim_run
from helix_dbos._store import reads
from helix_dbos._store.statements import to_json
from helix_dbos.types import AssistantMessage, ParsedToolCall, ToolResultMessage, UserMessage
from runtime_testkit import (
    RESULT_TIMEOUT,
    Gate,
    assert_paired,
    call,
    calls,
    finish,
    result_for,
    rows,
    session_status,
    statements_run,
    text,
    unique,
    use_model,
    wait_for,
)


class Verdict(BaseModel):
    verdict: str


@tool
def note(value: str) -> dict:
    """Take a note."""
    return {"noted": value}


def snapshot(executor: Any, session_id: str) -> dict[str, Any]:
    """Everything a refused call must leave unchanged."""
    return {
        "session": rows(executor, "SELECT status, step_count, run_count, message_count, event_seq, output"
                        " FROM helix.sessions WHERE id = %(s)s", s=session_id),
        "messages": rows(executor, "SELECT seq, message FROM helix.messages WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %(s)s) ORDER BY seq", s=session_id),
        "runs": rows(executor, "SELECT run, status FROM helix.runs WHERE session_num = helix.session_num(%(s)s) ORDER BY run", s=session_id),
    }


# --- several runs per session ------------------------------------------------------------------


def test_execute_on_a_completed_session_is_a_new_turn_that_sees_the_whole_transcript(executor):
    agent = define_agent(unique("turns"), tools=[note])
    mock = use_model(
        executor,
        calls(call("c1", "note", {"value": "x"})),
        text("first answer"),
        text("second answer"),
    )
    first = executor.execute(agent, "question one")
    assert first.run == 1
    assert first.result(timeout=RESULT_TIMEOUT).output == "first answer"
    second = executor.execute(agent, "question two", session_id=first.session_id)
    assert (second.session_id, second.run) == (first.session_id, 2)
    result = second.result(timeout=RESULT_TIMEOUT)
    assert (result.status, result.output, result.step_count) == ("completed", "second answer", 3)

    seen = mock.get_last_input().messages
    assert [m.role for m in seen] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert seen[1] == UserMessage(content="question one")
    assert seen[4].content == "first answer"
    assert seen[5] == UserMessage(content="question two")

    runs = executor.list_runs(first.session_id)
    assert [(r.run, r.kind, r.status, r.start_step, r.end_step) for r in runs] == [
        (1, "execute", "completed", 0, 2),
        (2, "execute", "completed", 2, 3),
    ]
    assert [r.workflow_id for r in runs] == [first.workflow_id, second.workflow_id]
    session = executor.get_session(first.session_id)
    assert (session.status, session.run_count, session.step_count, session.output) == ("completed", 2, 3, "second answer")
    assert executor.handle(first.session_id) == second
    assert executor.handle(first.session_id, run=1) == first


def test_the_transcript_keeps_each_message_whole_in_a_row_of_its_own(executor):
    """``helix.messages`` has one row per message, stored whole; the transcript, a fork and
    a prefix read all see the messages one by one, in order."""
    agent = define_agent(unique("rows"), tools=[note])
    use_model(executor, calls(call("c1", "note", {"value": "x"}), call("c2", "note", {"value": "y"})), text("done"))
    handle = executor.execute(agent, "go")
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    sid = handle.session_id

    stored = rows(executor, "SELECT seq, step, message FROM helix.messages"
                  " WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %(s)s) ORDER BY seq", s=sid)
    assert [(r["seq"], r["step"]) for r in stored] == [(0, 0), (1, 1), (2, 1), (3, 1), (4, 2)]
    roles = ["user", "assistant", "tool", "tool", "assistant"]
    assert [r["message"]["role"] for r in stored] == roles
    assert stored[1]["message"]["tool_calls"][0]["arguments"] == {"value": "x"}, "a call is stored whole"
    assert stored[2]["message"]["tool_name"] == "note", "a tool result is stored whole"
    session = executor.get_session(sid)
    assert [m.role for m in session.messages] == roles and session.message_count == 5
    assert [m.tool_call_id for m in session.messages if isinstance(m, ToolResultMessage)] == ["c1", "c2"]

    forked = commands.fork(executor.pool, sid, 1)
    assert [m.role for m in executor.get_session(forked.session_id).messages] == roles[:4]
    assert forked.message_count == 4
    with executor.pool.connection() as conn:
        assert [m.role for m in reads.load_messages(conn, sid, before_seq=3)] == roles[:3]
        assert [(e.seq, e.step) for e in reads.transcript(conn, sid)] == [(0, 0), (1, 1), (2, 1), (3, 1), (4, 2)]


def test_a_continued_run_sees_the_transcript_as_the_first_run_s_model_did(executor):
    """The next run's model sees the transcript read back from ``helix.messages`` exactly as
    the first run's model saw it in memory."""
    agent = define_agent(unique("by-ref"), tools=[note])
    mock = use_model(
        executor,
        calls(call("c1", "note", {"value": "x\u00e9"}), call("c2", "note", {"value": "y"}), content="Noting."),
        text("done"),
        text("again"),
    )
    first = executor.execute(agent, "go")
    assert first.result(timeout=RESULT_TIMEOUT).status == "completed"
    sid = first.session_id
    seen_in_memory = mock.get_last_input().messages  # system, user, assistant, tool, tool

    second = executor.execute(agent, "more", session_id=sid)
    assert second.result(timeout=RESULT_TIMEOUT).status == "completed"
    seen_from_database = mock.get_last_input().messages
    assert seen_from_database[:5] == seen_in_memory
    assert seen_from_database[5:] == [AssistantMessage(content="done"), UserMessage(content="more")]
    forked = commands.fork(executor.pool, sid, 2)
    assert executor.get_session(forked.session_id).messages == executor.get_session(sid).messages[:6]


class Tally(BaseModel):
    n: int = 0


@tool
def bump(ctx: ToolContext) -> dict:
    """Count one."""
    ctx.update_state(lambda tally: setattr(tally, "n", tally.n + 1))
    return {"bumped": True}


@tool
def peek(ctx: ToolContext) -> dict:
    """Read the count."""
    return {"n": ctx.get_state().n}


def test_a_run_takes_its_history_from_its_first_transaction_without_reading_it_again(executor, monkeypatch):
    """A run's first execution gets the transcript and state its ``helix_begin_run``
    transaction read (``AgentRuntime.began_here``): ``load_run_context``, which a recovered
    run calls, is not called, and the second run still sees the first run's messages and state."""
    loads: list[tuple[Any, ...]] = []
    load = executor.runtime.load_run_context
    monkeypatch.setattr(executor.runtime, "load_run_context", lambda *args: loads.append(args) or load(*args))
    agent = define_agent(unique("one-read"), tools=[bump, peek], state_schema=Tally)
    mock = use_model(executor, calls(call("b1", "bump")), text("one"), calls(call("p1", "peek")), text("two"))
    first = executor.execute(agent, "go")
    assert first.result(timeout=RESULT_TIMEOUT).status == "completed"
    second = executor.execute(agent, "more", session_id=first.session_id)
    assert second.result(timeout=RESULT_TIMEOUT).status == "completed"

    seen = mock.get_last_input().messages
    assert [m.role for m in seen] == ["system", "user", "assistant", "tool", "assistant", "user", "assistant", "tool"]
    assert json.loads(result_for(seen, "p1").content) == {"n": 1}  # the state the first run left
    assert loads == []


def test_a_run_is_claimed_with_one_statement_which_also_returns_its_history(executor):
    """The caller's claim of a new session's run is one statement (``helix.claim_run``);
    claimed again, the run is found, nothing is written, and the same statement returns
    where it began, its queue, the transcript and the state at its start step."""
    claims: list[int] = []
    claim = commands.claim_started_run

    def counted_claim(*args):
        before = len(statements)
        claim(*args)
        claims.append(len(statements) - before)

    agent = define_agent(unique("one-claim"), tools=[bump], state_schema=Tally)
    use_model(executor, calls(call("b1", "bump")), text("done"))
    pools = (executor.pool, executor.runtime.pool, executor.runtime.statements)  # the caller claims on the last
    with statements_run(*pools, thread=threading.current_thread()) as statements:  # the pools serve the run's workflow too
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(commands, "claim_started_run", counted_claim)
            handle = executor.execute(agent, "go")
        assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
        assert claims == [1], statements

        request = RunRequest(session_id=handle.session_id, run=1, agent_name=agent.name, input="go")
        with executor.pool.connection() as conn, conn.transaction():
            before = len(statements)
            found = claim_run(conn, request, {"n": 0}, context=True)
            assert len(statements) - before == 1
    session = executor.get_session(handle.session_id)
    assert [m.role for m in session.messages] == ["user", "assistant", "tool", "assistant"]  # nothing added
    assert (found.step_count, found.start_seq, found.queue, found.refused) == (0, 1, None, None)  # where it began
    assert found.message_seq == session.message_count
    assert found.context == (session.messages, {"n": 0})  # the state at its start step


def test_continuing_a_completed_structured_output_session_shows_the_paired_finish(executor):
    agent = define_agent(unique("continue-out"), output_schema=Verdict)
    mock = use_model(executor, finish("f1", verdict="good"), finish("f2", verdict="better"))
    first = executor.execute(agent, "judge it")
    assert first.result(timeout=RESULT_TIMEOUT).output == {"verdict": "good"}
    second = executor.execute(agent, "judge again", session_id=first.session_id)
    result = second.result(timeout=RESULT_TIMEOUT)
    assert (result.status, result.output) == ("completed", {"verdict": "better"})

    seen = mock.get_last_input().messages
    assert [m.role for m in seen] == ["system", "user", "assistant", "tool", "user"]
    assert seen[2].tool_calls[0].name == "__finish__"
    assert (seen[3].tool_call_id, json.loads(seen[3].content)) == ("f1", {"acknowledged": True})
    assert seen[4] == UserMessage(content="judge again")
    assert_paired(seen)
    session = executor.get_session(first.session_id)
    assert session.output == {"verdict": "better"}
    assert_paired(session.messages)


def test_legacy_session_with_an_unpaired_finish_is_healed_when_continued(executor):
    agent = define_agent(unique("legacy"), output_schema=Verdict)
    executor.register(agent)
    sid = unique("legacy-session")
    transcript = [
        UserMessage(content="judge it"),
        AssistantMessage(tool_calls=[ParsedToolCall(id="old-finish", name="__finish__", arguments={"verdict": "ok"})]),
    ]
    with executor.pool.connection() as conn, conn.transaction():
        conn.execute(
            "INSERT INTO helix.sessions (num, id, agent_name, status, step_count, run_count, message_count, output,"
            " root_session_num) SELECT n, %s, %s, 'completed', 1, 1, 2, %s, n"
            " FROM nextval(pg_get_serial_sequence('helix.sessions', 'num')) AS n",
            (sid, agent.name, to_json({"verdict": "ok"})),
        )
        conn.execute(
            "INSERT INTO helix.state_snapshots (session_num, step, state) VALUES (helix.session_num(%s), 0, '{}')",
            (sid,),
        )
        conn.execute(
            "INSERT INTO helix.runs (session_num, run, workflow_id, status, start_step, end_step, start_seq)"
            " VALUES (helix.session_num(%s), 1, %s, 'completed', 0, 1, 1)",
            (sid, f"legacy-{sid}"),
        )
        for seq, message in enumerate(transcript):
            conn.execute(
                "INSERT INTO helix.messages (session_num, seq, run, step, message)"
                " VALUES ((SELECT num FROM helix.sessions WHERE id = %s), %s, 1, %s, %s)",
                (sid, seq, seq, to_json(message.model_dump(mode="json", exclude_none=True))),
            )
    mock = MockLLMAdapter()
    mock.add_response(finish("new-finish", verdict="fresh"))
    executor.llm = mock
    handle = executor.execute(agent, "judge again", session_id=sid)
    assert handle.run == 2
    result = handle.result(timeout=RESULT_TIMEOUT)
    assert (result.status, result.output) == ("completed", {"verdict": "fresh"})

    seen = mock.get_last_input().messages
    assert [m.role for m in seen] == ["system", "user", "assistant", "tool", "user"]
    healed = seen[3]
    assert isinstance(healed, ToolResultMessage)
    assert (healed.tool_call_id, healed.tool_name, json.loads(healed.content)) == (
        "old-finish", "__finish__", {"acknowledged": True}
    )
    assert_paired(seen)
    stored = executor.get_session(sid).messages
    assert stored[:4] == seen[1:]
    assert_paired(stored)
    assert [r.run for r in executor.list_runs(sid)] == [1, 2]


# --- busy sessions and idempotent starts ---------------------------------------------------------


def test_execute_on_a_busy_session_raises_and_loses_nothing(executor):
    gate = Gate()
    agent = define_agent(unique("busy"), tools=[gate.tool()])
    use_model(executor, calls(call("g1", "wait_here")), text("finished"))
    handle = executor.execute(agent, "first")
    gate.wait_entered()
    assert executor.runtime.live_events.flush(RESULT_TIMEOUT)  # the model's tool call is in the stream
    assert session_status(executor, handle.session_id) == "active"
    before = snapshot(executor, handle.session_id)

    with pytest.raises(SessionBusyError, match="in progress"):
        executor.execute(agent, "second", session_id=handle.session_id)
    with pytest.raises(SessionBusyError):
        executor.resume(agent, handle.session_id)
    assert snapshot(executor, handle.session_id) == before

    gate.open()
    result = handle.result(timeout=RESULT_TIMEOUT)
    assert (result.status, result.output) == ("completed", "finished")
    session = executor.get_session(handle.session_id)
    assert session.run_count == 1
    assert [m.content for m in session.messages if m.role == "user"] == ["first"]


def test_a_second_execute_racing_the_start_of_a_run_is_refused_not_merged(executor):
    """Two callers continue one session at once. Both read it as completed before the
    first run has claimed it (the row lock below holds the claim back), so both ask for
    run 2. The second must get SessionBusyError, not the first caller's run: otherwise
    its message is silently dropped and its handle reports an answer to another message."""
    agent = define_agent(unique("race"))
    use_model(executor, text("one"), lambda messages: text(f"answer to {messages[-1].content}"))
    first = executor.execute(agent, "first")
    first.result(timeout=RESULT_TIMEOUT)
    sid = first.session_id
    with ThreadPoolExecutor(1) as pool, executor.pool.connection() as locker:
        with locker.transaction(force_rollback=True):
            locker.execute("SELECT id FROM helix.sessions WHERE id = %s FOR UPDATE", (sid,))
            starting = pool.submit(executor.execute, agent, "second", session_id=sid)  # waits to claim run 2
            wait_for(lambda: DBOS.get_workflow_status(run_workflow_id(sid, 2)) is not None, what="run 2's start")
            try:
                third = executor.execute(agent, "third", session_id=sid)
            except SessionBusyError:
                third = None
        second = starting.result(timeout=RESULT_TIMEOUT)
    assert second.result(timeout=RESULT_TIMEOUT).output == "answer to second"
    assert third is None, (
        f"execute(..., 'third') did not raise SessionBusyError; it returned {third} whose result is "
        f"{third.result(timeout=RESULT_TIMEOUT).output!r}: the message 'third' was dropped"
    )
    session = executor.get_session(sid)
    assert [m.content for m in session.messages if m.role == "user"] == ["first", "second"]
    assert session.run_count == 2


def test_starting_the_same_run_twice_is_idempotent(executor):
    gate = Gate()
    agent = define_agent(unique("idem"), tools=[gate.tool()])
    executor.register(agent)
    mock = use_model(executor, calls(call("g1", "wait_here")), text("once"))
    sid = unique("idem-session")
    request = RunRequest(session_id=sid, run=1, agent_name=agent.name, input="hello").model_dump(mode="json")
    workflow_id = run_workflow_id(sid, 1)

    with SetWorkflowID(workflow_id):
        first = DBOS.start_workflow(workflow.agent_run_workflow, request)
    gate.wait_entered()
    with SetWorkflowID(workflow_id):  # while the first is running
        second = DBOS.start_workflow(workflow.agent_run_workflow, request)
    gate.open()
    assert first.get_result() == second.get_result()
    with SetWorkflowID(workflow_id):  # after it ended
        third = DBOS.start_workflow(workflow.agent_run_workflow, request)
    assert third.get_result() == first.get_result()
    assert first.get_result()["output"] == "once"

    assert gate.calls == 1 and len(mock.inputs) == 2
    assert [(r.run, r.status) for r in executor.list_runs(sid)] == [(1, "completed")]
    session = executor.get_session(sid)
    assert (session.run_count, session.step_count) == (1, 2)
    assert [m.role for m in session.messages] == ["user", "assistant", "tool", "assistant"]
    assert executor.handle(sid).result(timeout=RESULT_TIMEOUT).output == "once"


# --- bad input: a clear error, nothing lost ---------------------------------------------------


def test_execute_an_unknown_agent_name_is_a_clear_error(executor):
    sid = unique("nobody-session")
    with pytest.raises(AgentNotRegisteredError, match="no-such-agent"):
        executor.execute("no-such-agent", "hi", session_id=sid)
    assert session_status(executor, sid) is None


def test_execute_a_registered_agent_by_name(executor):
    agent = define_agent(unique("by-name"))
    executor.register(agent)
    use_model(executor, text("hi by name"))
    handle = executor.execute(agent.name, "hi")
    assert handle.result(timeout=RESULT_TIMEOUT).output == "hi by name"


def test_execute_on_a_session_of_another_agent_is_a_clear_error(executor):
    owner = define_agent(unique("owner"))
    other = define_agent(unique("intruder"))
    use_model(executor, text("mine"))
    handle = executor.execute(owner, "hi")
    handle.result(timeout=RESULT_TIMEOUT)
    before = snapshot(executor, handle.session_id)
    with pytest.raises(HelixError, match=f"belongs to agent '{owner.name}'"):
        executor.execute(other, "let me in", session_id=handle.session_id)
    with pytest.raises(HelixError, match="belongs to agent"):
        executor.resume(other, handle.session_id)
    assert snapshot(executor, handle.session_id) == before


def test_a_second_agent_with_a_taken_name_is_refused(executor):
    name = unique("twin")
    first = define_agent(name, "one")
    executor.register(first)
    with pytest.raises(HelixError, match="already registered"):
        executor.execute(define_agent(name, "two"), "hi")
    assert executor.agent(name) is first


def test_execute_with_input_that_is_not_json_is_a_clear_error(executor):
    agent = define_agent(unique("badinput"))
    sid = unique("badinput-session")
    with pytest.raises(TypeError, match="JSON serializable"):
        executor.execute(agent, object(), session_id=sid)
    assert session_status(executor, sid) is None


def test_execute_with_structured_input_sends_it_as_json(executor):
    agent = define_agent(unique("jsoninput"))
    mock = use_model(executor, text("ok"))
    executor.execute(agent, {"question": "why", "n": 2}).result(timeout=RESULT_TIMEOUT)
    assert json.loads(mock.get_last_input().messages[1].content) == {"question": "why", "n": 2}
    executor.execute(agent, Verdict(verdict="v")).result(timeout=RESULT_TIMEOUT)
    assert json.loads(mock.get_last_input().messages[1].content) == {"verdict": "v"}


def test_unknown_session_ids_are_a_clear_error_everywhere(executor):
    agent = define_agent(unique("ghost"))
    executor.register(agent)
    sid = unique("no-such-session")
    for attempt in (
        lambda: executor.get_session(sid),
        lambda: executor.get_session(sid, at_step=0),
        lambda: executor.list_runs(sid),
        lambda: executor.get_usage(sid),
        lambda: executor.interrupt(sid),
        lambda: executor.abort(sid),
        lambda: executor.resume(agent, sid),
        lambda: executor.handle(sid),
        lambda: executor.stream(sid),
    ):
        with pytest.raises(SessionNotFoundError, match=sid):
            attempt()
    assert session_status(executor, sid) is None


@pytest.mark.parametrize("run", [0, -1, 2])
def test_a_handle_on_a_run_that_does_not_exist_is_a_clear_error(executor, run):
    agent = define_agent(unique("handles"))
    use_model(executor, text("done"))
    handle = executor.execute(agent, "hi")
    handle.result(timeout=RESULT_TIMEOUT)
    with pytest.raises(HelixError, match=f"no run {run}"):
        executor.handle(handle.session_id, run=run)
    assert executor.handle(handle.session_id, run=1) == handle


def test_resume_of_a_completed_session_is_a_clear_error(executor):
    agent = define_agent(unique("done"))
    use_model(executor, text("done"))
    handle = executor.execute(agent, "hi")
    handle.result(timeout=RESULT_TIMEOUT)
    before = snapshot(executor, handle.session_id)
    with pytest.raises(HelixError, match="execute"):
        executor.resume(agent, handle.session_id)
    assert snapshot(executor, handle.session_id) == before
