"""DBOS's own tools agree with helix: `dbos workflow cancel | resume | fork | steps` run on
helix runs (the real `dbos` CLI, in another process), and nothing pickled gets in."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from dbos import DBOS, DBOSClient
from pydantic import BaseModel

from helix_dbos import ToolContext, define_agent, define_tool
from runtime_testkit import (
    RESULT_TIMEOUT,
    call,
    calls,
    cli,
    events,
    rows,
    session_status,
    text,
    unique,
    use_model,
    wait_for,
)

DBOS_CLI = Path(sys.executable).with_name("dbos")


def dbos(executor: Any, *args: str) -> str:
    """``dbos workflow <args> --sys-db-url <test database>`` in a new process."""
    proc = subprocess.run(
        [str(DBOS_CLI), "workflow", *args, "--sys-db-url", executor.database_url],
        capture_output=True, text=True, timeout=90,
    )
    assert proc.returncode == 0, f"dbos workflow {' '.join(args)}: {proc.stdout}\n{proc.stderr}"
    return proc.stdout


class Refund(BaseModel):
    amount: int


class Ledger:
    def __init__(self) -> None:
        self.ran: list[int] = []

    def tool(self) -> Any:
        def refund(args: Refund, ctx: ToolContext) -> dict[str, int]:
            self.ran.append(args.amount)
            return {"refunded": args.amount}

        return define_tool("refund", "Refund.", Refund, refund, require_approval=True)


def waiting_run(executor: Any, ledger: Ledger) -> Any:
    agent = define_agent(unique("dbos-tools"), system_prompt="x", tools=[ledger.tool()])
    use_model(executor, calls(call("r1", "refund", {"amount": 7})), text("refunded"))
    handle = executor.execute(agent, "refund 7")
    wait_for(lambda: session_status(executor, handle.session_id) == "awaiting_approval", what="the approval wait")
    waiter = f"{handle.workflow_id}:wait:1"
    wait_for(lambda: executor.get_current_run(handle.session_id).workflow_id == waiter, what="the step's waiter")
    return handle


def waiter_of(executor: Any, handle: Any) -> str:
    """The workflow that holds a run waiting for an approval: its step's waiter (the run's
    own workflow ended when it parked). helix's current run names it."""
    workflow_id = executor.get_current_run(handle.session_id).workflow_id
    assert workflow_id == f"{handle.workflow_id}:wait:1"
    return workflow_id


def pending_status(executor: Any, session_id: str) -> str:
    return rows(executor, "SELECT status FROM helix.pending_tool_calls WHERE session_num = helix.session_num(%(s)s)", s=session_id)[0]["status"]


def test_dbos_cancel_aborts_the_session_and_dbos_resume_brings_it_back(executor: Any) -> None:
    ledger = Ledger()
    handle = waiting_run(executor, ledger)
    waiter = waiter_of(executor, handle)

    dbos(executor, "cancel", waiter)
    assert session_status(executor, handle.session_id) == "aborted"
    assert pending_status(executor, handle.session_id) == "cancelled"
    assert [r.status for r in executor.list_runs(handle.session_id)] == ["aborted"]
    refused = cli(executor, "approve", handle.session_id, "r1", expect=1)
    assert "was cancelled with its run" in refused.stderr

    dbos(executor, "resume", waiter)
    assert session_status(executor, handle.session_id) == "awaiting_approval"
    assert pending_status(executor, handle.session_id) == "pending"
    run = executor.get_current_run(handle.session_id)
    assert (run.status, run.workflow_status) in {("active", "ENQUEUED"), ("active", "PENDING")}

    cli(executor, "approve", handle.session_id, "r1")
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    assert ledger.ran == [7]
    assert [e["type"] for e in events(executor, handle.session_id) if e["type"] in ("aborted", "resumed", "finish")] == [
        "aborted", "resumed", "finish",
    ]
    assert [(r.status, r.workflow_status) for r in executor.list_runs(handle.session_id)] == [("completed", "SUCCESS")]


def test_helix_cancel_then_dbos_resume_continues_the_run(executor: Any) -> None:
    ledger = Ledger()
    handle = waiting_run(executor, ledger)
    waiter = waiter_of(executor, handle)

    cli(executor, "cancel", handle.session_id, "--reason", "wrong customer")
    assert session_status(executor, handle.session_id) == "aborted"
    assert executor.get_current_run(handle.session_id).error == "wrong customer"
    assert DBOS.get_workflow_status(waiter).status == "CANCELLED"

    dbos(executor, "resume", waiter)
    assert session_status(executor, handle.session_id) == "awaiting_approval"
    cli(executor, "approve", handle.session_id, "r1")
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    assert session_status(executor, handle.session_id) == "completed"
    assert ledger.ran == [7]


def test_helix_resume_of_a_dbos_cancelled_run(executor: Any) -> None:
    ledger = Ledger()
    handle = waiting_run(executor, ledger)
    dbos(executor, "cancel", waiter_of(executor, handle))

    resumed = json.loads(cli(executor, "resume", handle.session_id, "--json").stdout)
    assert resumed["status"] == "awaiting_approval"
    cli(executor, "approve", handle.session_id, "r1")
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"


def test_dbos_fork_of_a_helix_run_is_refused_and_changes_nothing(executor: Any) -> None:
    lookup = define_tool("lookup", "Look up.", Refund, lambda args, ctx: {"found": args.amount})
    agent = define_agent(unique("fork"), system_prompt="x", tools=[lookup])
    use_model(executor, calls(call("l1", "lookup", {"amount": 1})), text("done"))
    handle = executor.execute(agent, "go")
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    before = executor.get_session(handle.session_id)

    out = dbos(executor, "fork", handle.workflow_id, "--step", "3", "--forked-workflow-id", f"{handle.workflow_id}-copy")
    assert f"{handle.workflow_id}-copy" in out
    forked = DBOSClient(system_database_url=executor.database_url)
    try:
        result = forked.retrieve_workflow(f"{handle.workflow_id}-copy").get_result()
    finally:
        forked.destroy()
    assert result["status"] == "failed"
    assert "cannot be forked that way" in result["error"] and "helix-dbos fork" in result["error"]
    after = executor.get_session(handle.session_id)
    assert (after.status, after.step_count, after.run_count, after.messages) == (
        before.status, before.step_count, before.run_count, before.messages,
    )


def test_dbos_workflow_steps_shows_json_not_pickles(executor: Any) -> None:
    lookup = define_tool("lookup", "Look up.", Refund, lambda args, ctx: {"found": args.amount})
    agent = define_agent(unique("steps"), system_prompt="x", tools=[lookup])
    use_model(executor, calls(call("j1", "lookup", {"amount": 5})), text("done"))
    handle = executor.execute(agent, "go")
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"

    steps = json.loads(dbos(executor, "steps", handle.workflow_id))
    [tool_step] = [s for s in steps if s["function_name"] == "tool:lookup"]
    assert tool_step["output"]["result"] == {"found": 5}
    assert [s["output"]["result"]["type"] for s in steps if s["function_name"] == "llm"] == ["tool_calls", "text"]
    got = json.loads(dbos(executor, "get", handle.workflow_id))
    assert got["input"]["args"][0]["session_id"] == handle.session_id
    assert (got["output"]["status"], got["output"]["output"]) == ("completed", "done")
    stored = rows(executor, "SELECT DISTINCT serialization FROM dbos.operation_outputs WHERE workflow_uuid = %(w)s",
                  w=handle.workflow_id)
    assert {r["serialization"] for r in stored} == {"portable_json"}


def test_a_pickled_message_to_a_helix_topic_is_refused_and_never_unpickled(executor: Any) -> None:
    ledger = Ledger()
    handle = waiting_run(executor, ledger)
    client = DBOSClient(system_database_url=executor.database_url)
    try:
        with pytest.raises(Exception, match="must be portable JSON"):
            client.send(handle.workflow_id, {"kind": "approval", "approved": True}, "helix.answer.r1")
        with pytest.raises(Exception, match="takes portable JSON input"):
            client.enqueue({"workflow_name": "helix_agent_run", "queue_name": "agents"},
                           {"session_id": unique("pickled"), "run": 1, "agent_name": "x", "input": "hi"})
    finally:
        client.destroy()
    assert rows(executor, "SELECT count(*) AS n FROM dbos.notifications WHERE destination_uuid = %(w)s",
                w=handle.workflow_id)[0]["n"] == 0
    assert session_status(executor, handle.session_id) == "awaiting_approval"
    assert ledger.ran == []
    cli(executor, "approve", handle.session_id, "r1")
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
