"""Sub-agent identity: a child session is created by its parent and verified as such.

A child's session id is derived (``<parent>-sub-<call id>``), so anyone may have taken it
before: a session started under that id by another caller is never adopted. The parent
claims the child session in a checkpointed transaction before it starts the child's
workflow; a name already taken gives the model an error result and leaves the other
session untouched. A child run also refuses to begin on a session whose recorded parent
is not its own.
"""

from __future__ import annotations

import json
from typing import Any

from dbos import DBOS, SetWorkflowID
from runtime_testkit import (
    RESULT_TIMEOUT,
    USAGE_ORDER,
    agent,
    assert_paired,
    call,
    calls,
    events,
    family_model,
    last_result,
    result_for,
    rows,
    sub,
    text,
    unique,
)

from helix_dbos import create_sub_agent_tool
from helix_dbos._durable.payloads import RunRequest, run_workflow_id
from helix_dbos._durable.workflow import agent_run_workflow

SECRET = "the other user's private answer"


def snapshot(executor: Any, session_id: str) -> dict[str, Any]:
    """Everything stored for a session."""
    return {
        "session": rows(executor, "SELECT * FROM helix.sessions WHERE id = %(s)s", s=session_id),
        "messages": rows(executor, "SELECT * FROM helix.messages WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %(s)s) ORDER BY seq", s=session_id),
        "runs": rows(executor, "SELECT * FROM helix.runs WHERE session_num = helix.session_num(%(s)s) ORDER BY run", s=session_id),
        "events": events(executor, session_id),
        "snapshots": rows(executor, "SELECT * FROM helix.state_snapshots WHERE session_num = helix.session_num(%(s)s)", s=session_id),
        "usage": rows(executor, f"SELECT * FROM helix.session_usage(%(s)s) ORDER BY {USAGE_ORDER}", s=session_id),
        "workflows": rows(executor, "SELECT workflow_uuid, status FROM dbos.workflow_status WHERE workflow_uuid LIKE %(w)s"
                          " ORDER BY workflow_uuid", w=f"helix:{session_id}:%"),
    }


def test_a_pre_existing_session_with_the_childs_name_is_never_adopted(executor: Any) -> None:
    child = agent(unique("helper"))
    parent = agent(unique("lead"), tools=[create_sub_agent_tool(child)])
    other = agent(unique("other"))
    parent_id = unique("parent")
    taken = sub(parent_id, "c1")
    mock = family_model(executor, {
        other: [text(SECRET)],
        parent: [
            calls(call("c1", f"subagent__{child.name}", {"input": "work"})),
            lambda m: text(f"parent saw: {last_result(m).content}"),
        ],
        child: [text("child output")],
    })
    squatter = executor.execute(other, "a private question", session_id=taken)
    assert squatter.result(timeout=RESULT_TIMEOUT).output == SECRET
    before = snapshot(executor, taken)

    handle = executor.execute(parent, "go", session_id=parent_id)
    result = handle.result(timeout=RESULT_TIMEOUT)

    assert result.status == "completed"
    assert SECRET not in json.dumps(result.model_dump(mode="json"))
    messages = executor.get_session(parent_id).messages
    assert_paired(messages)
    stored = json.dumps([m.model_dump(mode="json") for m in messages]) + json.dumps(events(executor, parent_id))
    assert SECRET not in stored  # nothing of the other session reached this transcript or stream
    refused = result_for(messages, "c1")
    assert refused.is_error
    assert f"session {taken!r} already exists and was not created by this call" in refused.content
    assert snapshot(executor, taken) == before  # the other session is untouched
    assert f"You are {child.name}." not in [i.messages[0].content for i in mock.inputs]  # the child never ran


def test_a_child_run_refuses_a_session_whose_recorded_parent_is_another(executor: Any) -> None:
    other = agent(unique("other"))
    family_model(executor, {other: [text(SECRET), text("a second turn that must not happen")]})
    taken = unique("taken")
    assert executor.execute(other, "a private question", session_id=taken).result(timeout=RESULT_TIMEOUT).output == SECRET
    before = snapshot(executor, taken)

    forged = RunRequest(session_id=taken, run=2, agent_name=other.name, input="leak it",
                        parent_session_id=unique("intruder"), parent_tool_call_id="c9", root_session_id="intruder")
    with SetWorkflowID(run_workflow_id(taken, 2)):
        refused = DBOS.start_workflow(agent_run_workflow, forged.model_dump(mode="json")).get_result()

    assert refused["status"] == "failed"
    assert "not a sub-agent session of" in refused["error"] and SECRET not in json.dumps(refused)
    after = snapshot(executor, taken)
    after["workflows"] = [w for w in after["workflows"] if w["workflow_uuid"] != run_workflow_id(taken, 2)]
    assert after == before
