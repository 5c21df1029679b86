"""Text Postgres cannot store (NUL, lone surrogates), at every boundary (helix_dbos/_text.py).

Text a run produces (the model's text, tool-call ids and arguments, tool results and
errors, state values, events) is stored with each such character replaced by U+FFFD, and
the tool sees exactly what is recorded; the run goes on. Text a caller hands in (a run's
input, an answer, a reason) is refused with ``UnstorableTextError`` before anything is
written, and the session id stays usable.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from pydantic import BaseModel
from runtime_testkit import (
    RESULT_TIMEOUT,
    assert_paired,
    call,
    calls,
    cli,
    events,
    result_for,
    rows,
    session_status,
    text,
    unique,
    use_model,
    wait_for,
)

from helix_dbos import (
    ApprovalResponse,
    ClientToolResult,
    SessionNotFoundError,
    ToolContext,
    UnstorableTextError,
    define_agent,
    define_tool,
)
from helix_dbos.types import AssistantMessage

NUL = "\x00"
LONE = "\ud800"
FFFD = "\ufffd"


class Query(BaseModel):
    q: str


class Notes(BaseModel):
    notes: list[str] = []
    tags: dict[str, str] = {}


def echo_agent(seen: list[Any], **options: Any) -> Any:
    def echo(args: Query, ctx: ToolContext) -> dict[str, Any]:
        seen.append((ctx.tool_call_id, args.q))
        return {"echo": args.q}

    return define_agent(unique("echo"), system_prompt="s", tools=[define_tool("echo", "Echo.", Query, echo)], **options)


def completed(handle: Any) -> Any:
    result = handle.result(timeout=RESULT_TIMEOUT)
    assert (result.status, result.error) == ("completed", None), result
    return result


def assert_no_unstorable_rows(executor: Any, session_id: str) -> None:
    """Nothing stored for the session holds a NUL or a lone surrogate (jsonb could not)."""
    for table, column in (("messages", "message"), ("events", "data")):
        sql = f"SELECT {column}::text AS t FROM helix.{table} WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %(s)s)"
        for row in rows(executor, sql, s=session_id):
            assert "\\u0000" not in row["t"] and "\\ud8" not in row["t"], row


# --- text a run produces: replaced, the run goes on ---------------------------------------------


def test_nul_in_the_models_text_is_stored_replaced_and_the_run_completes(executor: Any) -> None:
    use_model(executor, text(f"hello{NUL}world"))
    agent = define_agent(unique("nul-text"), system_prompt="s")
    handle = executor.execute(agent, "hi")
    result = completed(handle)
    assert result.output == f"hello{FFFD}world"
    session = executor.get_session(handle.session_id)
    assert session.messages[-1].content == f"hello{FFFD}world"  # type: ignore[union-attr]
    assert [e["data"]["content"] for e in events(executor, handle.session_id) if e["type"] == "text"] == [
        f"hello{FFFD}world"
    ]


def test_nul_in_tool_arguments_the_tool_sees_what_is_recorded(executor: Any) -> None:
    seen: list[Any] = []
    use_model(executor, calls(call("c1", "echo", {"q": f"a{NUL}b", f"k{NUL}": 1})), text("done"))
    handle = executor.execute(echo_agent(seen), "go")
    completed(handle)
    assert seen == [("c1", f"a{FFFD}b")]  # ran once, on the stored text
    messages = executor.get_session(handle.session_id).messages
    assert_paired(messages)
    assistant = next(m for m in messages if isinstance(m, AssistantMessage))
    assert assistant.tool_calls[0].arguments == {"q": f"a{FFFD}b", f"k{FFFD}": 1}
    assert json.loads(result_for(messages, "c1").content) == {"echo": f"a{FFFD}b"}


def test_nul_in_a_tool_call_id_pairs_the_result_with_the_recorded_id(executor: Any) -> None:
    seen: list[Any] = []
    use_model(executor, calls(call(f"c{NUL}1", "echo", {"q": "x"})), text("done"))
    handle = executor.execute(echo_agent(seen), "go")
    completed(handle)
    assert seen == [(f"c{FFFD}1", "x")]
    messages = executor.get_session(handle.session_id).messages
    assert_paired(messages)
    assert result_for(messages, f"c{FFFD}1").is_error is False
    assert_no_unstorable_rows(executor, handle.session_id)


def test_nul_in_a_tools_exception_message_becomes_its_error_result(executor: Any) -> None:
    ran: list[int] = []

    def explode(args: Query, ctx: ToolContext) -> dict[str, Any]:
        ran.append(1)
        raise ValueError(f"bad{NUL}thing")

    agent = define_agent(unique("nul-err"), system_prompt="s", tools=[define_tool("explode", "Fails.", Query, explode)])
    use_model(executor, calls(call("c1", "explode", {"q": "x"})), text("recovered"))
    handle = executor.execute(agent, "go")
    assert completed(handle).output == "recovered"
    assert ran == [1]
    result = result_for(executor.get_session(handle.session_id).messages, "c1")
    assert result.is_error and f"bad{FFFD}thing" in result.content


def test_nul_in_a_state_value_key_and_event_written_by_a_tool_is_stored_replaced(executor: Any) -> None:
    ran: list[int] = []

    def note(args: Query, ctx: ToolContext) -> dict[str, Any]:
        ran.append(1)

        def write(draft: Any) -> None:
            draft.notes.append(f"x{NUL}y")
            draft.tags[f"t{NUL}"] = f"v{LONE}"

        ctx.update_state(write)
        ctx.emit("noted", {"what": f"e{NUL}"})
        return {"ok": True}

    agent = define_agent(unique("nul-state"), system_prompt="s", state_schema=Notes,
                         tools=[define_tool("note", "Note.", Query, note)])
    use_model(executor, calls(call("c1", "note", {"q": "x"})), text("done"))
    handle = executor.execute(agent, "go")
    completed(handle)
    assert ran == [1]
    session = executor.get_session(handle.session_id)
    assert session.state == {"notes": [f"x{FFFD}y"], "tags": {f"t{FFFD}": f"v{FFFD}"}}
    assert [e["data"]["data"] for e in events(executor, handle.session_id) if e["type"] == "custom"] == [
        {"what": f"e{FFFD}"}
    ]
    assert executor.get_session(handle.session_id, at_step=1).state == session.state  # the patch log agrees


def test_lone_surrogates_from_the_model_and_a_tool_result_are_stored_replaced(executor: Any) -> None:
    def shout(args: Query, ctx: ToolContext) -> dict[str, Any]:
        return {"said": f"{args.q}!\udc80"}

    agent = define_agent(unique("lone"), system_prompt="s", tools=[define_tool("shout", "Shout.", Query, shout)])
    use_model(executor, calls(call("c1", "shout", {"q": f"hi{LONE}"}), content=f"th{LONE}nk"), text(f"end{LONE}"))
    handle = executor.execute(agent, "go")
    assert completed(handle).output == f"end{FFFD}"
    messages = executor.get_session(handle.session_id).messages
    assert json.loads(result_for(messages, "c1").content) == {"said": f"hi{FFFD}!{FFFD}"}
    assert next(m for m in messages if isinstance(m, AssistantMessage)).content == f"th{FFFD}nk"
    assert_no_unstorable_rows(executor, handle.session_id)


# --- text a caller hands in: refused, nothing written, the session id stays usable ---------------


@pytest.mark.parametrize("bad", [NUL, LONE])
def test_unstorable_user_input_is_refused_and_the_session_id_stays_usable(executor: Any, bad: str) -> None:
    agent = define_agent(unique("nul-input"), system_prompt="s")
    sid = unique("nul-input-session")
    use_model(executor, text("hello"))
    with pytest.raises(UnstorableTextError, match="input has .* at position 2"):
        executor.execute(agent, f"hi{bad}there", session_id=sid)
    with pytest.raises(SessionNotFoundError):
        executor.get_session(sid)
    assert rows(executor, "SELECT workflow_uuid FROM dbos.workflow_status WHERE workflow_uuid LIKE %(w)s",
                w=f"helix:{sid}:%") == []

    handle = executor.execute(agent, "hi there", session_id=sid)
    assert completed(handle).output == "hello"
    assert (handle.session_id, handle.run) == (sid, 1)


def test_unstorable_session_ids_and_operator_arguments_are_refused(executor: Any) -> None:
    agent = define_agent(unique("nul-id"), system_prompt="s")
    with pytest.raises(UnstorableTextError, match="session_id has NUL"):
        executor.execute(agent, "hi", session_id=f"s{NUL}1")
    with pytest.raises(UnstorableTextError, match="session_id has a lone surrogate"):
        executor.get_session(f"s{LONE}")
    with pytest.raises(UnstorableTextError, match="session_id"):
        executor.abort(f"s{NUL}")
    use_model(executor, text("done"))
    handle = executor.execute(agent, "hi")
    completed(handle)
    with pytest.raises(UnstorableTextError, match="new_session_id"):
        from helix_dbos import admin

        admin.fork(executor.database_url, handle.session_id, 1, new_session_id=f"f{NUL}")


def gated_agent() -> Any:
    ran: list[str] = []

    def act(args: Query, ctx: ToolContext) -> dict[str, Any]:
        ran.append(args.q)
        return {"done": args.q}

    tool = define_tool("act", "Act.", Query, act, require_approval=True)
    return define_agent(unique("nul-deny"), system_prompt="s", tools=[tool]), ran


def wait_pending(executor: Any, session_id: str, call_id: str) -> None:
    wait_for(lambda: [p.tool_call_id for p in executor.list_pending(session_id)] == [call_id],
             timeout=RESULT_TIMEOUT, what=f"pending call {call_id}")


def answers(executor: Any, session_id: str) -> list[dict[str, Any]]:
    return rows(executor, "SELECT tool_call_id, approved, reason FROM helix.tool_call_answers WHERE session_num = helix.session_num(%(s)s)",
                s=session_id)


def test_an_unstorable_deny_reason_is_refused_and_a_clean_answer_still_works(executor: Any) -> None:
    agent, ran = gated_agent()
    use_model(executor, calls(call("a1", "act", {"q": "x"})), text("done"))
    handle = executor.execute(agent, "go")
    sid = handle.session_id
    wait_pending(executor, sid, "a1")

    with pytest.raises(UnstorableTextError, match="reason has NUL"):
        executor.submit_tool_result(sid, ApprovalResponse(tool_call_id="a1", approved=False, reason=f"no{NUL}way"))
    reason = os.fsdecode(b"caf\xe9")  # a Latin-1 byte in argv arrives as a lone surrogate
    out = cli(executor, "deny", sid, "a1", "--reason", reason, expect=1)
    assert "reason has a lone surrogate (U+DCE9) at position 3" in out.stderr
    assert answers(executor, sid) == []
    assert session_status(executor, sid) == "awaiting_approval"

    executor.submit_tool_result(sid, ApprovalResponse(tool_call_id="a1", approved=False, reason="no way"))
    completed(handle)
    assert ran == []
    assert answers(executor, sid) == [{"tool_call_id": "a1", "approved": False, "reason": "no way"}]
    assert "no way" in result_for(executor.get_session(sid).messages, "a1").content


class Answer(BaseModel):
    answer: str


def test_an_unstorable_client_result_is_refused_and_a_correct_one_still_works(executor: Any) -> None:
    ask = define_tool("ask_user", "Ask the user.", Query, "client", output_schema=Answer)
    agent = define_agent(unique("nul-client"), system_prompt="s", tools=[ask])
    use_model(executor, calls(call("q1", "ask_user", {"q": "colour?"})), text("done"))
    handle = executor.execute(agent, "go")
    sid = handle.session_id
    wait_pending(executor, sid, "q1")

    with pytest.raises(UnstorableTextError, match=r"result\.answer has NUL \(U\+0000\) at position 4"):
        executor.submit_tool_result(sid, ClientToolResult(tool_call_id="q1", result={"answer": f"blue{NUL}"}))
    with pytest.raises(UnstorableTextError, match="error has a lone surrogate"):
        executor.submit_tool_result(sid, ClientToolResult(tool_call_id="q1", error=f"broke{LONE}"))
    assert answers(executor, sid) == []
    assert session_status(executor, sid) == "awaiting_client_tool"

    executor.submit_tool_result(sid, ClientToolResult(tool_call_id="q1", result={"answer": "blue"}))
    completed(handle)
    assert json.loads(result_for(executor.get_session(sid).messages, "q1").content) == {"answer": "blue"}
