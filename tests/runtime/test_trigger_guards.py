"""helix never breaks DBOS's own writes: when helix's side fails inside a trigger helix
keeps on a ``dbos.*`` table, DBOS's write commits anyway and helix catches up.

helix's side is broken for real, in Postgres: a test-only trigger on ``helix.runs`` makes
every change of the test session's ``workflow_id`` made from inside another trigger (what
``helix.follow_new_run_workflow`` and ``helix.follow_dbos_status`` do, inside DBOS's
transaction) raise. It counts its failures in a sequence, which no rollback takes back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from dbos import DBOS, DBOSClient, WorkflowSerializationFormat
from pydantic import BaseModel

from helix_dbos import AgentConfig, ApprovalResponse, ToolContext, define_agent, define_tool
from runtime_testkit import RESULT_TIMEOUT, call, calls, rows, session_status, text, unique, use_model, wait_for

BREAK = """
CREATE SEQUENCE public.{name}_failures;
CREATE FUNCTION public.{name}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF pg_trigger_depth() > 1 AND starts_with(NEW.workflow_id, '{prefix}') THEN
        PERFORM nextval('public.{name}_failures');
        RAISE EXCEPTION 'helix''s side is broken by the test';
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER {name} BEFORE UPDATE OF workflow_id ON helix.runs
    FOR EACH ROW EXECUTE FUNCTION public.{name}();
"""

REPAIR = """
DROP TRIGGER {name} ON helix.runs;
DROP FUNCTION public.{name}();
DROP SEQUENCE public.{name}_failures;
"""


@contextmanager
def helix_side_broken(executor: Any, session_id: str) -> Iterator[Callable[[], int]]:
    """While open, helix's triggers on DBOS's tables fail for ``session_id``'s runs; yields
    how many times they failed so far."""
    name = unique("break").replace("-", "_")
    with executor.pool.connection() as conn, conn.transaction():
        conn.execute(BREAK.format(name=name, prefix=f"helix:{session_id}:"))

    def failures() -> int:
        with executor.pool.connection() as conn:
            return int(conn.execute(f"SELECT last_value - 1 + is_called::int FROM public.{name}_failures").fetchone()[0])

    try:
        yield failures
    finally:
        with executor.pool.connection() as conn, conn.transaction():
            conn.execute(REPAIR.format(name=name))


class Refund(BaseModel):
    amount: int


def refunding_agent(executor: Any, refunded: list[int]) -> AgentConfig:
    """An agent whose one step calls ``refund``, a tool that waits for an approval."""

    def refund(args: Refund, ctx: ToolContext) -> dict[str, int]:
        refunded.append(args.amount)
        return {"refunded": args.amount}

    tool = define_tool("refund", "Refund.", Refund, refund, require_approval=True)
    use_model(executor, calls(call("r1", "refund", {"amount": 7})), text("refunded"))
    return define_agent(unique("guarded"), system_prompt="x", tools=[tool])


def run_workflow(executor: Any, session_id: str) -> str | None:
    """The workflow helix says holds the session's first run (None before the run exists)."""
    found = rows(executor, "SELECT workflow_id FROM helix.runs WHERE run = 1"
                           " AND session_num = (SELECT num FROM helix.sessions WHERE id = %(s)s)", s=session_id)
    return found[0]["workflow_id"] if found else None


def workflow_status(workflow_id: str) -> str | None:
    """DBOS's status of the workflow (None: DBOS has no such workflow)."""
    found = DBOS.get_workflow_status(workflow_id)
    return None if found is None else found.status


def test_dbos_creates_a_waiter_and_a_continuation_when_helix_s_trigger_fails_and_helix_catches_up(
    executor: Any,
) -> None:
    refunded: list[int] = []
    agent = refunding_agent(executor, refunded)
    sid = unique("guarded")
    with helix_side_broken(executor, sid) as failures:
        handle = executor.execute(agent, "refund 7", session_id=sid)
        waiter = f"{handle.workflow_id}:wait:1"
        wait_for(lambda: workflow_status(waiter) == "PENDING", what="DBOS's insert of the waiter")
        assert failures() == 1
        wait_for(lambda: run_workflow(executor, sid) == waiter, what="the run following its waiter")

        executor.submit_tool_result(sid, ApprovalResponse(tool_call_id="r1", approved=True))
        assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
        assert failures() >= 2  # the continuation's creation failed on helix's side too
    continuation = f"{handle.workflow_id}:step:1"
    assert workflow_status(continuation) == "SUCCESS"
    assert (run_workflow(executor, sid), session_status(executor, sid)) == (continuation, "completed")
    assert refunded == [7]


def test_a_queued_continuation_helix_missed_is_followed_when_dbos_cancels_it(executor: Any) -> None:
    refunded: list[int] = []
    agent = refunding_agent(executor, refunded)
    sid = unique("guarded")
    handle = executor.execute(agent, "refund 7", session_id=sid)
    waiter = f"{handle.workflow_id}:wait:1"
    wait_for(lambda: run_workflow(executor, sid) == waiter, what="the run following its waiter")
    continuation = f"{handle.workflow_id}:step:1"

    with helix_side_broken(executor, sid) as failures:
        client = DBOSClient(system_database_url=executor.database_url)
        try:  # the continuation, on a queue no worker serves: it stays ENQUEUED
            client.enqueue({"workflow_name": "helix_agent_run", "queue_name": unique("unserved"),
                            "workflow_id": continuation, "serialization_type": WorkflowSerializationFormat.PORTABLE},
                           {"session_id": sid})
        finally:
            client.destroy()
        assert failures() == 1
        assert workflow_status(continuation) == "ENQUEUED"
        assert run_workflow(executor, sid) == waiter  # helix missed it

    DBOS.cancel_workflow(continuation)
    run = executor.get_current_run(sid)
    assert (run.workflow_id, run.status, session_status(executor, sid)) == (continuation, "aborted", "aborted")
    DBOS.cancel_workflow(waiter)
    assert run_workflow(executor, sid) == continuation
    assert refunded == []
