"""The async API: ``execute_async``, ``result_async`` and ``stream_async`` on a real
Postgres, in an event loop of the test's own; many readers share one listening connection."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

from pydantic import BaseModel
from runtime_testkit import RESULT_TIMEOUT, Gate, call, calls, rows, text, unique, use_model

from helix_dbos import ToolContext, define_agent, define_tool
from helix_dbos.answers import ApprovalResponse
from helix_dbos._deltas import DeltaRecord


class NoInput(BaseModel):
    pass


def test_an_async_run_and_its_async_tools_run_on_the_callers_event_loop(executor):
    seen: dict[str, Any] = {}

    async def where(args: NoInput, ctx: ToolContext) -> dict[str, Any]:
        seen["loop"] = asyncio.get_running_loop()
        return {"ok": True}

    agent = define_agent(unique("async"), tools=[define_tool("where", "Where it runs.", NoInput, where)])
    use_model(executor, calls(call("c1", "where")), text("done"))

    async def main() -> Any:
        handle = await executor.execute_async(agent, "go", unique("async-session"))
        result = await handle.result_async(timeout=RESULT_TIMEOUT)
        await executor.close_async()
        return result, asyncio.get_running_loop()

    result, loop = asyncio.run(main())

    assert result.status == "completed" and result.output == "done"
    assert seen["loop"] is loop


def test_stream_async_yields_events_and_deltas_in_order_until_the_run_ends(executor):
    agent = define_agent(unique("async"))
    use_model(executor, text("first"), text("one two three four five six"), stream_chunk_chars=4, delta_delay_seconds=0.01)
    sid = unique("async-session")

    async def main() -> list[Any]:
        from_seq = await _first_turn(executor, agent, sid)
        reading = asyncio.ensure_future(_collect(executor.stream_async(sid, from_seq, deltas=True)))
        await asyncio.sleep(0.3)  # the reader listens before the run starts
        await executor.execute_async(agent, "count", sid)
        items = await asyncio.wait_for(reading, RESULT_TIMEOUT)
        await executor.close_async()
        return items

    items = asyncio.run(main())

    deltas = [i.text for i in items if isinstance(i, DeltaRecord)]
    events = [i.type for i in items if not isinstance(i, DeltaRecord)]
    assert "".join(deltas) == "one two three four five six" and len(deltas) > 3
    assert events[0] == "run_start" and events[-1] == "finish"
    text_at = next(n for n, i in enumerate(items) if getattr(i, "type", None) == "text")
    assert max(n for n, i in enumerate(items) if isinstance(i, DeltaRecord)) < text_at  # deltas before the durable text


def test_result_async_follows_a_run_that_parked_for_an_approval(executor):
    class Amount(BaseModel):
        amount: int

    refund = define_tool("refund", "Refund.", Amount, lambda args, ctx: {"ok": args.amount}, require_approval=True)
    agent = define_agent(unique("async"), tools=[refund])
    use_model(executor, calls(call("r1", "refund", {"amount": 5})), text("refunded"))
    sid = unique("async-session")

    async def main() -> Any:
        handle = await executor.execute_async(agent, "refund 5", sid)
        waiting = asyncio.ensure_future(handle.result_async(timeout=RESULT_TIMEOUT))
        while not rows(executor, "SELECT 1 FROM helix.pending_tool_calls WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %(id)s)", id=sid):
            await asyncio.sleep(0.05)
        await asyncio.to_thread(executor.submit_tool_result, sid, ApprovalResponse(tool_call_id="r1", approved=True))
        result = await waiting
        await executor.close_async()
        return result

    result = asyncio.run(main())

    assert result.status == "completed" and result.output == "refunded"


def test_a_hundred_async_readers_share_one_listening_connection_and_no_thread(executor):
    agent = define_agent(unique("async"))
    use_model(executor, text("first"), text("shared"), delta_delay_seconds=0.01)
    sid = unique("async-session")

    async def main() -> tuple[list[list[Any]], int, int]:
        from_seq = await _first_turn(executor, agent, sid)
        threads = threading.active_count()
        readers = [asyncio.ensure_future(_collect(executor.stream_async(sid, from_seq, deltas=True))) for _ in range(100)]
        await asyncio.sleep(0.5)
        listening = await asyncio.to_thread(_listening_connections, executor)
        more_threads = threading.active_count() - threads
        handle = await executor.execute_async(agent, "hi", sid)
        await handle.result_async(timeout=RESULT_TIMEOUT)
        results = await asyncio.wait_for(asyncio.gather(*readers), RESULT_TIMEOUT)
        await executor.close_async()
        return results, listening, more_threads

    results, listening, more_threads = asyncio.run(main())

    assert listening == 1
    assert more_threads <= 2  # the loop's pool of DBOS/asyncio helpers, not one per reader
    assert all([i.type for i in r if not isinstance(i, DeltaRecord)][-1] == "finish" for r in results)


async def _collect(stream: Any) -> list[Any]:
    return [item async for item in stream]


async def _first_turn(executor: Any, agent: Any, sid: str) -> int:
    """Run the session's first turn to its end; the seq its next run's events start after."""
    handle = await executor.execute_async(agent, "first", sid)
    await handle.result_async(timeout=RESULT_TIMEOUT)
    return int(rows(executor, "SELECT event_seq FROM helix.sessions WHERE id = %(id)s", id=sid)[0]["event_seq"]) + 1


def _listening_connections(executor: Any) -> int:
    found = rows(
        executor,
        "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database()"
        " AND (query LIKE 'LISTEN helix_events%%' OR query LIKE 'LISTEN \"helix_deltas_%%')",
    )
    return int(found[0]["n"])


class Notes(BaseModel):
    notes: list[str] = []


def test_an_update_state_is_published_while_the_tool_runs_and_one_it_returns_after_comes_with_its_step(executor):
    released = threading.Event()

    def work(args: NoInput, ctx: ToolContext) -> dict[str, Any]:
        ctx.update_state(lambda draft: draft.notes.append("first"))
        assert released.wait(RESULT_TIMEOUT), "the test never saw the live patch"
        ctx.update_state(lambda draft: draft.notes.append("second"))
        return {"ok": True}

    agent = define_agent(unique("async"), tools=[define_tool("work", "Works slowly.", NoInput, work)], state_schema=Notes)
    use_model(executor, text("first"), calls(call("w1", "work")), text("done"))
    sid = unique("async-session")

    async def collect(stream: Any) -> list[Any]:
        items = []
        async for item in stream:
            items.append(item)
            if isinstance(item, DeltaRecord) and item.kind == "state":
                released.set()
        return items

    async def main() -> list[Any]:
        from_seq = await _first_turn(executor, agent, sid)
        reading = asyncio.ensure_future(collect(executor.stream_async(sid, from_seq, deltas=True)))
        await asyncio.sleep(0.3)  # the reader listens
        await executor.execute_async(agent, "work", sid)
        items = await asyncio.wait_for(reading, RESULT_TIMEOUT)
        await executor.close_async()
        return items

    items = asyncio.run(main())

    live = [i for i in items if isinstance(i, DeltaRecord) and i.kind == "state"]
    assert [d.patch for d in live] == [[{"op": "add", "path": "/notes/-", "value": "first"}]]  # "second": the tool returned at once
    assert {(d.tool_call_id, d.tool_name, d.index) for d in live} == {("w1", "work", 0)}
    patches = [i for i in items if not isinstance(i, DeltaRecord) and i.type == "state_patch"]
    assert patches and {"op": "add", "path": "/notes/-", "value": "second"} in patches[-1].data["patches"]
    order = [i.type if not isinstance(i, DeltaRecord) else f"delta:{i.kind}" for i in items]
    assert order.index("delta:state") < order.index("tool_result") < order.index("state_patch")


def test_resume_async_continues_an_interrupted_session_with_a_new_run(executor):
    gate = Gate()
    agent = define_agent(unique("async"), tools=[gate.tool()])
    use_model(executor, calls(call("g1", "wait_here")), text("resumed"))
    sid = unique("async-session")

    async def main() -> tuple[Any, Any, Any]:
        first = await executor.execute_async(agent, "go", sid)
        await asyncio.to_thread(gate.wait_entered)
        assert await asyncio.to_thread(executor.interrupt, sid)
        gate.open()
        interrupted = await first.result_async(timeout=RESULT_TIMEOUT)
        second = await executor.resume_async(agent, sid)
        resumed = await second.result_async(timeout=RESULT_TIMEOUT)
        await executor.close_async()
        return interrupted, second, resumed

    interrupted, second, resumed = asyncio.run(main())

    assert interrupted.status == "interrupted"
    assert second.run == 2 and (resumed.status, resumed.output) == ("completed", "resumed")


def test_a_subscriber_added_while_the_listener_changes_channels_misses_no_delta(executor):
    """Entering ``subscribe`` returns once the connection listens on the session's delta
    channel, even when the subscriber came while the listener was busy listening on many
    other channels: a delta published right after it arrives."""
    import psycopg

    from helix_dbos._client.notifications import WAKE, Notifications
    from helix_dbos._database import libpq_url
    from helix_dbos._store.delta_channels import delta_channel

    delta = DeltaRecord(session_id="late", run=1, step=1, attempt=1, index=0, kind="text", text="hi")

    async def main() -> list[Any]:
        notifications = Notifications(executor.database_url)
        received = []
        async with contextlib.AsyncExitStack() as stack:
            conn = await stack.enter_async_context(
                await psycopg.AsyncConnection.connect(libpq_url(executor.database_url), autocommit=True)
            )
            await stack.enter_async_context(notifications.subscribe(unique("first"), deltas=True))  # connected, idle
            others = [stack.enter_async_context(notifications.subscribe(unique("busy"), deltas=True)) for _ in range(500)]
            crowd = asyncio.gather(*others)                     # the listener LISTENs on 500 more channels
            await asyncio.sleep(0.05)                           # ... and is busy doing so
            late = await stack.enter_async_context(notifications.subscribe(delta.session_id, deltas=True))
            await conn.execute("SELECT pg_notify(%s, %s)", (delta_channel(delta.session_id), delta.to_payload()))
            while (item := await late.next(timeout=5)) == WAKE:
                continue  # the listener's (re)connection wakes every subscriber
            received.append(item)
            await crowd
        await notifications.close()
        return received

    assert asyncio.run(main()) == [delta]
