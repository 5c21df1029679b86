"""The workflow protocol: the DBOS steps a run records, by name and order, per run shape.

A recovered run replays its recorded steps by position: a deploy that changes this
sequence strands or corrupts runs that were in flight. These snapshots make any such
change visible; change them only together with ``WORKFLOW_PROTOCOL_VERSION``.
"""

from __future__ import annotations

from typing import Any

from dbos import DBOS
from pydantic import BaseModel

from helix_dbos import AgentHooks, ApprovalResponse, MockLLMAdapter, ToolContext, create_sub_agent_tool, define_agent, define_tool
from runtime_testkit import RESULT_TIMEOUT, agent, call, calls, family_model, text, unique, use_model, wait_for


class Query(BaseModel):
    q: str


def _lookup(args: Query, ctx: ToolContext) -> dict[str, Any]:
    return {"found": args.q}


def recorded_steps(workflow_id: str) -> list[str]:
    return [step["function_name"] for step in DBOS.list_workflow_steps(workflow_id)]


def test_text_run_records_begin_and_llm(executor: Any) -> None:
    use_model(executor, text("hello"))
    handle = executor.execute(define_agent(unique("proto-text"), system_prompt="s"), "hi")
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    assert recorded_steps(handle.workflow_id) == ["helix_begin_run", "llm"]


def test_tool_run_records_one_step_per_tool_in_call_order(executor: Any) -> None:
    lookup = define_tool("lookup", "Look up.", Query, _lookup)
    use_model(executor, calls(call("c1", "lookup", {"q": "a"}), call("c2", "lookup", {"q": "b"})), text("done"))
    handle = executor.execute(define_agent(unique("proto-tools"), system_prompt="s", tools=[lookup]), "go")
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    assert recorded_steps(handle.workflow_id) == [
        "helix_begin_run",
        "llm", "tool:lookup", "tool:lookup",
        "llm",
    ]


def test_a_step_whose_hooks_wrote_the_state_records_one_save_after_its_commit(executor: Any) -> None:
    """Hooks that write (here only on the first step) add ONE helix_save_hook_state after
    that step's commit; a step whose hooks wrote nothing records what a hook-less one does."""

    def after_tool(call_: Any, result: Any, ctx: Any) -> None:
        ctx.update_state(lambda draft: draft.update(last=call_.id))

    lookup = define_tool("lookup", "Look up.", Query, _lookup)
    use_model(executor, calls(call("c1", "lookup", {"q": "a"})), text("done"))
    config = define_agent(unique("proto-hooks"), system_prompt="s", tools=[lookup], hooks=AgentHooks(after_tool=after_tool))
    handle = executor.execute(config, "go")
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    assert recorded_steps(handle.workflow_id) == [
        "helix_begin_run",
        "llm", "tool:lookup", "helix_save_hook_state",
        "llm",
    ]


def test_error_step_without_should_stop_asks_the_model_again(executor: Any) -> None:
    mock = MockLLMAdapter()  # queued: the error step adds no assistant message to key a script on
    mock.add_response({"type": "error", "error": "overloaded", "should_stop": False})
    mock.add_response(text("hello"))
    executor.llm = mock
    handle = executor.execute(define_agent(unique("proto-error"), system_prompt="s"), "hi")
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    assert recorded_steps(handle.workflow_id) == [
        "helix_begin_run", "llm", "llm",
    ]


def test_approval_run_parks_and_its_waiter_starts_the_continuation(executor: Any) -> None:
    gated = define_tool("lookup", "Look up.", Query, _lookup, require_approval=True)
    use_model(executor, calls(call("a1", "lookup", {"q": "x"})), text("done"))
    config = define_agent(unique("proto-approval"), system_prompt="s", tools=[gated])
    handle = executor.execute(config, "go")
    run, waiter, continuation = (f"{handle.workflow_id}{suffix}" for suffix in ("", ":wait:1", ":step:1"))
    # recv records its deadline (DBOS.sleep) when it starts waiting
    wait_for(lambda: "DBOS.sleep" in recorded_steps(waiter), timeout=RESULT_TIMEOUT, what="the waiter's recv")
    executor.submit_tool_result(handle.session_id, ApprovalResponse(tool_call_id="a1", approved=True))
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    assert recorded_steps(run) == ["helix_begin_run", "llm", "helix_suspend", "helix_await_answers"]
    assert recorded_steps(waiter) == [
        "helix_collect_answers", "DBOS.recv", "DBOS.sleep", "helix_collect_answers", "helix_agent_run",
    ]
    assert recorded_steps(continuation) == ["helix_continue_run", "tool:lookup", "llm"]


def test_sub_agent_run_records_the_child_workflow(executor: Any) -> None:
    child = agent(unique("proto-child"))
    parent = agent(unique("proto-parent"), tools=[create_sub_agent_tool(child, name="helper")])
    family_model(executor, {
        parent: [calls(call("s1", "subagent__helper", {"input": "work"})), text("parent done")],
        child: [text("child done")],
    })
    handle = executor.execute(parent, "go")
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    steps = recorded_steps(handle.workflow_id)
    assert steps[:2] == ["helix_begin_run", "llm"]
    assert steps[2] == "helix_claim_child"  # the child's session, created for this call first
    assert steps[3] == "helix_agent_run"  # the child's workflow, started as a child of this run
    assert steps[4:] == ["DBOS.getResult", "llm"]
