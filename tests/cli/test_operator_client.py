"""The operator client (``AdminClient`` / ``AsyncAdminClient``), ``helix-dbos interrupt``,
the old names kept for one release, and the session row's writes that must not move
``updated_at`` or ``version``.

Runs happen in this process's DBOS (the session-scoped ``executor`` fixture); the CLI runs
in a new process with nothing but the database URL.
"""

from __future__ import annotations

import asyncio
import json
import warnings
from typing import Any

import psycopg
import pytest

from helix_dbos import admin
from helix_dbos._database import libpq_url
from helix_dbos._client.queues import QueueSettings, register_queue
from helix_dbos._store import writes
from helix_dbos._store.records import HookStateSave, SessionRecord
from helix_dbos.admin import AdminClient, AsyncAdminClient
from helix_dbos.errors import HelixError, SessionNotFoundError

from test_operator_commands import (  # type: ignore[import-not-found]
    RESULT_TIMEOUT,
    rows,
    run_cli,
    status_of,
    url,  # noqa: F401  (fixture)
    wait_for,
    waiting,  # noqa: F401  (fixture)
)


def session_row(executor: Any, session_id: str) -> dict[str, Any]:
    return rows(executor, "SELECT updated_at, version, interrupt_requested, status FROM helix.sessions WHERE id = %(s)s",
                s=session_id)[0]


# --- the client --------------------------------------------------------------------------------


def test_a_client_holds_one_pool_and_one_dbos_client_across_calls(executor: Any, url: str, waiting: Any) -> None:
    _, handle = waiting
    sid = handle.session_id
    with AdminClient(url) as ops:
        for _ in range(5):
            assert [c.tool_call_id for c in ops.list_pending(sid)] == ["r1"]
            assert ops.get_session(sid).session_id == sid
        assert ops.list_workers() is not None and ops.list_workers() is not None
        assert ops._pool.get_stats()["pool_available"] == 1  # one pooled connection served every read
        dbos_client = ops._workflows.client
        assert ops.state_at(sid, 1) == {"notes": ["a"]}
        assert ops._workflows.client is dbos_client
        session = ops.get_session(sid, at_step=1)
        assert session.state == {"notes": ["a"]} and [p.tool_call_id for p in session.pending] == ["r1"]
        assert [m.role for m in session.messages] == [m.role for m in executor.get_session(sid).messages]
        assert ops.get_usage(sid) == executor.get_usage(sid)
        assert ops.get_current_run(sid).run == 1
        with pytest.raises(SessionNotFoundError):
            ops.show_session("no-such-session")
    assert ops._workflows._client is None  # closed with the block


def test_the_async_client_reads_without_a_thread_and_answers_through_one_client(
    executor: Any, url: str, waiting: Any
) -> None:
    _, handle = waiting
    sid = handle.session_id

    async def operate() -> tuple[Any, ...]:
        async with AsyncAdminClient(url) as ops:
            pending = await ops.list_pending(sid)
            detail = await ops.show_session(sid)
            session = await ops.get_session(sid, at_step=2)
            runs = await ops.list_runs(sid)
            listed = [s.session_id for s in await ops.list_sessions(limit=1000)]
            with pytest.raises(SessionNotFoundError):
                await ops.list_runs("no-such-session")
            outcome = await ops.approve(sid, "r1", approver="ana")
            events = [e.type async for e in ops.stream(sid)]  # follows until the run ends
            return pending, detail, session, runs, listed, outcome, events

    pending, detail, session, runs, listed, outcome, events = asyncio.run(operate())
    assert [c.tool_call_id for c in pending] == ["r1"] and detail.session.session_id == sid
    assert session.state == {"notes": ["a", "b"]} and runs[0].run == 1 and sid in listed
    assert outcome.status == "accepted"
    assert events[0] == "run_start" and events[-1] == "finish"
    assert status_of(executor, sid) == "completed"


# --- interrupt -----------------------------------------------------------------------------------


def test_helix_dbos_interrupt_is_the_executors_durable_write(executor: Any, url: str, waiting: Any) -> None:
    _, handle = waiting
    sid = handle.session_id
    before = session_row(executor, sid)

    asked = json.loads(run_cli(url, "interrupt", sid, "--json").stdout)
    assert asked == {"session_id": sid, "run": 1, "workflow_id": f"{handle.workflow_id}:wait:3",
                     "status": "awaiting_approval", "changed": True, "enqueued_on": None}
    after = session_row(executor, sid)
    assert after["interrupt_requested"] is True
    assert (after["updated_at"], after["version"]) == (before["updated_at"], before["version"])  # status unchanged

    admin.approve(url, sid, "r1")  # the step ends, and the run stops there
    wait_for(lambda: status_of(executor, sid) == "interrupted", what="the run to stop after its step")
    assert "has no run in progress (status interrupted)" in run_cli(url, "interrupt", sid, expect=1).stderr
    with pytest.raises(HelixError, match="no run in progress"):
        admin.interrupt(url, sid)

    # An interrupted session needs a new run: from the CLI, onto a queue its workers listen on.
    assert "helix-dbos resume" in run_cli(url, "resume", sid, expect=1).stderr  # says to give --queue
    queue = f"resume-{sid[-8:]}"
    register_queue(QueueSettings(name=queue, polling_interval_sec=0.05))
    resumed = json.loads(run_cli(url, "resume", sid, "--queue", queue, "--json").stdout)
    assert resumed == {"session_id": sid, "run": 2, "workflow_id": f"helix:{sid}:run:2", "status": "active",
                       "changed": True, "enqueued_on": queue}
    assert executor.handle(sid, 2).result(timeout=RESULT_TIMEOUT).status == "completed"
    assert [r.kind for r in admin.list_runs(url, sid)] == ["execute", "resume"]
    with pytest.raises(HelixError, match="completed"):
        admin.resume(url, sid, queue=queue)


def test_resume_with_a_queue_continues_an_aborted_run_in_place(executor: Any, url: str, waiting: Any) -> None:
    _, handle = waiting
    sid = handle.session_id
    admin.abort(url, sid)
    done = admin.resume(url, sid, queue="nobody-listens-here")  # in place: no new run, no queue needed
    assert (done.run, done.enqueued_on, done.status) == (1, None, "awaiting_approval")
    admin.approve(url, sid, "r1")
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"


def test_the_async_interrupt_asks_in_one_transaction(executor: Any, url: str, waiting: Any) -> None:
    _, handle = waiting
    done = asyncio.run(admin.interrupt_async(url, handle.session_id))
    assert done.changed and done.status == "awaiting_approval"
    assert session_row(executor, handle.session_id)["interrupt_requested"] is True
    with pytest.raises(SessionNotFoundError):
        asyncio.run(admin.interrupt_async(url, "no-such-session"))


# --- old names -----------------------------------------------------------------------------------


def test_old_names_work_for_one_release_with_a_deprecation_warning(executor: Any, url: str, waiting: Any) -> None:
    _, handle = waiting
    sid = handle.session_id
    with pytest.warns(DeprecationWarning, match="admin.stream"):
        assert [e.type for e in admin.tail(url, sid, follow=False)][0] == "run_start"
    row = admin.list_sessions(url, limit=1000)[0]
    with pytest.warns(DeprecationWarning, match="session_id"):
        assert row.id == row.session_id
    assert SessionRecord.model_validate({**row.model_dump(), "id": "x", "session_id": "x"}).session_id == "x"
    with pytest.warns(DeprecationWarning, match="admin.abort"):
        done = admin.cancel(url, sid, reason="old name")
    assert done.changed and done.status == "aborted"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        admin.list_sessions(url, limit=1)  # the new names warn about nothing


def test_the_old_cli_cancel_warns_and_aborts(executor: Any, url: str, waiting: Any) -> None:
    _, handle = waiting
    proc = run_cli(url, "cancel", handle.session_id)
    assert proc.stderr.startswith("warning: helix-dbos cancel is deprecated") and "helix-dbos abort" in proc.stderr
    assert proc.stdout.startswith(f"aborted run 1 of session {handle.session_id}")
    assert status_of(executor, handle.session_id) == "aborted"


def test_the_routes_json_names_a_session_session_id_and_keeps_id_for_one_release() -> None:
    from datetime import datetime, timezone

    from helix_dbos.server.routes import session_json

    now = datetime.now(timezone.utc)
    row = SessionRecord(session_id="s1", agent_name="a", status="active", step_count=0, run_count=1,
                        message_count=0, event_seq=0, root_session_id="s1", created_at=now, updated_at=now)
    body = session_json(row)
    assert body["session_id"] == "s1" and body["id"] == "s1" and "messages" not in body


# --- the session row's writes ---------------------------------------------------------------------


def test_a_hook_state_save_moves_neither_updated_at_nor_version(executor: Any, url: str, waiting: Any) -> None:
    _, handle = waiting
    sid = handle.session_id
    before = session_row(executor, sid)
    with executor.pool.connection() as conn, conn.transaction():
        step = rows(executor, "SELECT step_count FROM helix.sessions WHERE id = %(s)s", s=sid)[0]["step_count"]
        saved = writes.save_hook_state(conn, HookStateSave(session_id=sid, run=1, step=step,
                                                           patch=[{"op": "add", "path": "/seen", "value": True}]))
    assert saved is not None and executor.get_session(sid).state["seen"] is True
    after = session_row(executor, sid)
    assert (after["updated_at"], after["version"]) == (before["updated_at"], before["version"])


def test_a_missing_session_is_one_sqlstate_in_every_function(url: str) -> None:
    calls = [
        "SELECT helix.session_num('no-such-session')",
        "SELECT helix.append_events('no-such-session', 1, 0, '[]'::jsonb)",
        "SELECT helix.commit_step('{\"session_id\": \"no-such-session\", \"run\": 1, \"step\": 1}'::jsonb)",
    ]
    codes = set()
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        for sql in calls:
            with pytest.raises(psycopg.Error) as raised:
                conn.execute(sql)
            codes.add(raised.value.sqlstate)
    assert codes == {"P0002"}  # no_data_found


# --- the executor's async twins ---------------------------------------------------------------------


def test_the_executors_async_twins_answer_as_their_sync_forms(executor: Any, waiting: Any) -> None:
    from helix_dbos import ApprovalResponse

    _, handle = waiting
    sid = handle.session_id
    expected = (executor.get_session(sid, at_step=1), executor.list_runs(sid), executor.get_usage(sid))

    async def operate() -> tuple[Any, ...]:
        try:
            read = (
                await executor.get_session_async(sid, at_step=1), await executor.list_runs_async(sid),
                await executor.get_current_run_async(sid), await executor.list_pending_async(sid),
                await executor.get_usage_async(sid),
            )
            with pytest.raises(SessionNotFoundError):
                await executor.get_usage_async("no-such-session")
            outcome = await executor.submit_tool_result_async(sid, ApprovalResponse(tool_call_id="r1", approved=True))
            await handle.result_async(timeout=RESULT_TIMEOUT)
            return read, outcome, await executor.abort_async(sid)
        finally:
            await executor.close_async()

    (session, runs, current, pending, usage), outcome, aborted = asyncio.run(operate())
    assert (session, runs, usage) == expected
    assert runs == [current] and current.run == 1 and [p.tool_call_id for p in pending] == ["r1"]
    assert outcome.status == "accepted" and aborted is False  # the run had completed
    assert status_of(executor, sid) == "completed"
