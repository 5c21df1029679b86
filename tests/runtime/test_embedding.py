"""Agents started from the user's own DBOS workflows: durable children with derived ids."""

from __future__ import annotations

from typing import Any

import pytest
from dbos import DBOS, SetWorkflowID

from pydantic import BaseModel

from helix_dbos import ApprovalResponse, MockLLMAdapter, WorkflowContextError, define_agent, define_tool
from runtime_testkit import RESULT_TIMEOUT, call, calls, rows, text, unique, wait_for

class Text(BaseModel):
    text: str


HOLDER: dict[str, Any] = {}
"""The test's executor and agent, for the workflows below (registered at import, before launch)."""


@DBOS.workflow()
def greet_twice(name: str) -> list[Any]:
    executor, agent = HOLDER["executor"], HOLDER["agent"]
    first = executor.execute(agent, f"hello {name}")
    second = executor.execute(agent, f"bye {name}")
    return [[first.session_id, first.result().output], [second.session_id, second.result().output]]


@DBOS.workflow()
def continue_session(session_id: str) -> Any:
    executor, agent = HOLDER["executor"], HOLDER["agent"]
    return executor.execute(agent, "again", session_id=session_id).result().output


@DBOS.workflow()
def publish_with_approval() -> Any:
    executor, agent = HOLDER["executor"], HOLDER["gated"]
    return executor.execute(agent, "publish").result().model_dump(mode="json")


@DBOS.step()
def start_inside_a_step() -> None:
    HOLDER["executor"].execute(HOLDER["agent"], "not here")


@DBOS.workflow()
def misuse() -> str:
    try:
        start_inside_a_step()
    except WorkflowContextError as exc:
        return str(exc)
    return "no error"


@pytest.fixture
def greeter(executor: Any) -> Any:
    agent = define_agent(unique("greeter"), system_prompt="Greet.")
    executor.register(agent)
    HOLDER.update(executor=executor, agent=agent)
    return agent


def test_runs_started_in_a_workflow_are_durable_children_with_derived_session_ids(executor: Any, greeter: Any) -> None:
    executor.llm = MockLLMAdapter(lambda messages, tools: text(f"answer to {messages[-1].content}"))
    workflow_id = unique("greet")
    with SetWorkflowID(workflow_id):
        result = DBOS.start_workflow(greet_twice, "ana").get_result()

    assert result == [
        [f"{workflow_id}-agent-1", "answer to hello ana"],
        [f"{workflow_id}-agent-3", "answer to bye ana"],
    ]
    steps = [s["function_name"] for s in DBOS.list_workflow_steps(workflow_id)]
    assert steps == ["helix_plan_run", "helix_agent_run"] * 2 + ["DBOS.getResult"] * 2
    # Running the same workflow id again replays it: same sessions, no new run.
    with SetWorkflowID(workflow_id):
        assert DBOS.start_workflow(greet_twice, "ana").get_result() == result
    found = rows(executor, "SELECT id, run_count FROM helix.sessions WHERE id LIKE %(p)s ORDER BY id", p=f"{workflow_id}-%")
    assert [(r["id"], r["run_count"]) for r in found] == [(f"{workflow_id}-agent-1", 1), (f"{workflow_id}-agent-3", 1)]


def test_a_workflow_continues_a_given_session_as_a_new_turn(executor: Any, greeter: Any) -> None:
    executor.llm = MockLLMAdapter(lambda messages, tools: text(f"turn {sum(m.role == 'user' for m in messages)}"))
    session_id = unique("s")
    assert executor.execute(greeter, "first", session_id=session_id).result(timeout=RESULT_TIMEOUT).output == "turn 1"

    assert DBOS.start_workflow(continue_session, session_id).get_result() == "turn 2"
    assert [r.status for r in executor.list_runs(session_id)] == ["completed", "completed"]


def test_starting_a_run_inside_a_step_is_a_clear_error(executor: Any, greeter: Any) -> None:
    message = DBOS.start_workflow(misuse).get_result()
    assert "cannot be started or awaited inside a DBOS step" in message


def test_a_workflow_awaits_a_run_that_parked_for_an_approval(executor: Any, greeter: Any) -> None:
    """The run parks at its approval (its workflow ends); the caller's result follows it
    through the waiter and the continuation, each one recorded step of the caller."""
    publish = define_tool("publish", "Publish.", Text, lambda args, ctx: {"published": args.text}, require_approval=True)
    gated = define_agent(unique("embedded-gated"), system_prompt="x", tools=[publish])
    executor.register(gated)
    HOLDER["gated"] = gated
    executor.llm = MockLLMAdapter(
        lambda messages, tools: text("published") if messages[-1].role == "tool" else calls(call("p1", "publish", {"text": "hi"}))
    )
    workflow_id = unique("embedded-approval")
    with SetWorkflowID(workflow_id):
        caller = DBOS.start_workflow(publish_with_approval)
    session_id = f"{workflow_id}-agent-1"
    wait_for(lambda: executor.list_pending(session_id), what="the approval request")
    executor.submit_tool_result(session_id, ApprovalResponse(tool_call_id="p1", approved=True))

    result = caller.get_result()
    assert (result["status"], result["output"]) == ("completed", "published")
    steps = [s["function_name"] for s in DBOS.list_workflow_steps(workflow_id)]
    assert steps == ["helix_plan_run", "helix_agent_run"] + ["DBOS.getResult"] * 3
