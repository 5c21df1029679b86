"""A tool body starts only once its attempt is recorded (``helix.tool_attempts``): what lets
``max_worker_losses`` count a call that takes its worker down. A step's parallel calls
are recorded together in one statement that runs while their steps begin; each body waits
for it, and a record that fails runs no body and fails the run with the record's error.
The step's commit drops the records (tests/runtime/test_step_commit.py); the bound itself
is tested with real workers in tests/workers/test_poison_runs.py."""

from __future__ import annotations

import uuid
from typing import Any

from runtime_testkit import RESULT_TIMEOUT, NoInput, call, calls, rows, text, unique, use_model

from helix_dbos import ToolContext, define_agent, define_tool


def own_attempt(executor: Any, ctx: ToolContext) -> list[dict[str, Any]]:
    """This call's attempt rows, read on another connection than the one that wrote them."""
    return rows(
        executor,
        "SELECT a.step, a.tool_call_id FROM helix.tool_attempts a JOIN helix.sessions s ON s.num = a.session_num"
        " WHERE s.id = %(s)s AND a.tool_call_id = %(c)s",
        s=ctx.session_id, c=ctx.tool_call_id,
    )


def test_each_parallel_body_finds_its_attempt_recorded_when_it_starts(executor):
    seen: dict[str, list[dict[str, Any]]] = {}

    def execute(_: NoInput, ctx: ToolContext) -> dict[str, Any]:
        seen[ctx.tool_call_id] = own_attempt(executor, ctx)
        return {"ok": True}

    look = define_tool("look", "Reads its own attempt record.", NoInput, execute)
    use_model(executor, calls(call("a1", "look"), call("a2", "look"), call("a3", "look")), calls(call("b1", "look")), text("end"))
    result = executor.execute(define_agent(unique("attempts-first"), tools=[look]), "go").result(timeout=RESULT_TIMEOUT)
    assert result.status == "completed", result
    assert seen == {
        "a1": [{"step": 1, "tool_call_id": "a1"}],
        "a2": [{"step": 1, "tool_call_id": "a2"}],
        "a3": [{"step": 1, "tool_call_id": "a3"}],
        "b1": [{"step": 2, "tool_call_id": "b1"}],  # a lone call records its own, in its step
    }


def test_a_failed_record_of_parallel_attempts_runs_no_body_and_fails_the_run_with_its_error(executor):
    refused = f"refused-{uuid.uuid4().hex[:8]}"
    constraint = f"no_{refused.replace('-', '_')}"
    ran: list[str] = []

    def execute(_: NoInput, ctx: ToolContext) -> dict[str, Any]:
        ran.append(ctx.tool_call_id)
        return {"ok": True}

    work = define_tool("work", "Does work.", NoInput, execute)
    use_model(executor, calls(call(refused, "work"), call("w2", "work")), text("end"))
    with executor.pool.connection() as conn:  # this test's own constraint, on the test's own database
        conn.execute(f"ALTER TABLE helix.tool_attempts ADD CONSTRAINT {constraint} CHECK (tool_call_id <> '{refused}') NOT VALID")
    try:
        handle = executor.execute(define_agent(unique("attempts-refused"), tools=[work]), "go")
        result = handle.result(timeout=RESULT_TIMEOUT)
    finally:
        with executor.pool.connection() as conn:
            conn.execute(f"ALTER TABLE helix.tool_attempts DROP CONSTRAINT {constraint}")
    assert ran == []
    assert result.status == "failed", result
    assert constraint in (result.error or ""), result.error
    assert rows(executor, "SELECT count(*) AS n FROM helix.tool_attempts a JOIN helix.sessions s ON s.num = a.session_num"
                          " WHERE s.id = %(s)s", s=handle.session_id) == [{"n": 0}]
