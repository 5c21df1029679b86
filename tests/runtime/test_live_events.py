"""Events reach the durable stream when they happen, not at the step's commit:
another process sees ``step_start`` and ``tool_call`` while a 2-second tool still runs, a
tool's result as soon as it ends, and a child's events in its parent's stream while the
child runs. Writing a step's events again (a replay, the commit) writes nothing."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from typing import Any

from pydantic import BaseModel
from runtime_testkit import (
    RESULT_TIMEOUT,
    Gate,
    agent,
    call,
    calls,
    events,
    family_model,
    rows,
    session_status,
    sub,
    text,
    unique,
    use_model,
    wait_for,
)

from helix_dbos import ApprovalResponse, ToolContext, create_sub_agent_tool, define_agent, define_tool
from helix_dbos.events import CustomEvent, StepStartEvent
from helix_dbos._store.live_events import LiveEventWriter
from helix_dbos._store.records import KeyedEvent

READER_SCRIPT = """
import json, sys
from helix_dbos._client.streams import follow_events
from helix_dbos._store.pools import create_pool

url, session_id = sys.argv[1], sys.argv[2]
pool = create_pool(url)
print("ready", flush=True)
for event in follow_events(url, session_id, 0, pool=pool, idle_timeout=60):
    print(json.dumps({"seq": event.seq, "step": event.step, "type": event.type, "data": event.data}), flush=True)
"""

TOOL_SECONDS = 2.0


class Pause(BaseModel):
    label: str


class Log(BaseModel):
    labels: list[str] = []


class Reader:
    """``follow_events`` in another process; what it printed, each line with the time it
    arrived. Returns once the process has imported helix (on a loaded machine that takes
    seconds, which would otherwise eat into the tool the test times against)."""

    def __init__(self, database_url: str, session_id: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", READER_SCRIPT, database_url, session_id],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        assert self.proc.stdout is not None
        ready = self.proc.stdout.readline()
        assert ready == "ready\n", (ready, self.proc.stderr.read() if self.proc.poll() is not None else "")
        self.lines: queue.Queue[tuple[float, dict[str, Any]]] = queue.Queue()
        self.seen: list[tuple[float, dict[str, Any]]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put((time.monotonic(), json.loads(line)))

    def until(self, last: Any, timeout: float = 20.0) -> tuple[float, dict[str, Any]]:
        """Read up to the first event for which ``last`` holds; when it arrived, and it."""
        while True:
            try:
                item = self.lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no matching event within {timeout}s; got {[e for _, e in self.seen]}") from None
            self.seen.append(item)
            if last(item[1]):
                return item

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def test_another_process_sees_step_start_and_tool_calls_while_a_2_second_tool_runs(executor):
    ended: dict[str, float] = {}

    def pause(i: Pause, ctx: ToolContext) -> dict:
        time.sleep(TOOL_SECONDS)
        ctx.update_state(lambda draft: draft.labels.append(i.label))
        ended[i.label] = time.monotonic()
        return {"paused": i.label}

    gate = Gate()
    live = define_agent(
        unique("live"), tools=[define_tool("pause", "Pause.", Pause, pause), gate.tool()], state_schema=Log
    )
    use_model(executor, calls(call("p1", "pause", {"label": "a"}), call("g1", "wait_here"), content="pausing"),
              text("done"))
    sid = unique("live-session")
    reader = Reader(executor.database_url, sid)
    try:
        handle = executor.execute(live, "go", session_id=sid)
        started, _ = reader.until(lambda e: e["type"] == "step_start")
        called, _ = reader.until(lambda e: e["type"] == "tool_call" and e["data"]["tool_call_id"] == "g1")
        assert "a" not in ended, "step_start and tool_call must arrive while the 2-second tool runs"
        assert [e["type"] for _, e in reader.seen] == ["run_start", "step_start", "text", "tool_call", "tool_call"]
        # The 2-second tool's result arrives when it ends, while its sibling still holds the step open.
        result_at, result = reader.until(lambda e: e["type"] == "tool_result")
        assert result["data"]["tool_call_id"] == "p1" and result_at >= ended["a"]
        assert not gate.left.is_set() and executor.get_session(sid).step_count == 0
        gate.open()
        reader.until(lambda e: e["type"] == "finish")
        assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    finally:
        gate.open()
        reader.close()
    assert started <= called < ended["a"]
    stored = events(executor, sid)
    assert [e["seq"] for e in stored] == list(range(1, len(stored) + 1))
    assert [(e["seq"], e["type"]) for _, e in reader.seen] == [(e["seq"], e["type"]) for e in stored]
    assert [e["type"] for e in stored if e["step"] == 1] == [
        "step_start", "text", "tool_call", "tool_call", "tool_result", "tool_result", "state_patch", "step_finish",
    ]


def test_a_childs_events_appear_in_the_parents_stream_while_the_child_runs(executor):
    gate = Gate()
    child = agent(unique("worker"), tools=[gate.tool()])
    parent = agent(unique("boss"), tools=[create_sub_agent_tool(child)])
    family_model(executor, {
        parent: [calls(call("w1", f"subagent__{child.name}", {"input": "work"})), text("parent done")],
        child: [calls(call("c1", "wait_here")), text("child done")],
    })
    sid = unique("parent-session")
    child_id = sub(sid, "w1")
    reader = Reader(executor.database_url, sid)
    try:
        handle = executor.execute(parent, "delegate", session_id=sid)
        reader.until(lambda e: e["type"] == "subagent_start")
        _, relayed = reader.until(
            lambda e: e["type"] == "subagent_event" and e["data"]["event"]["type"] == "tool_call"
        )
        assert not gate.left.is_set(), "the child's tool_call must reach the parent while the child's tool runs"
        assert relayed["data"]["session_id"] == child_id
        assert relayed["data"]["event"]["data"]["tool_call_id"] == "c1"
        gate.open()
        reader.until(lambda e: e["type"] == "finish")
        assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    finally:
        gate.open()
        reader.close()
    parent_events = events(executor, sid)
    assert [e["seq"] for e in parent_events] == list(range(1, len(parent_events) + 1))
    relayed_events = [e["data"]["event"] for e in parent_events if e["type"] == "subagent_event"]
    child_events = events(executor, child_id)
    # Every event of the child, once each, in the child's order, all inside the parent's step 1.
    assert [(e["seq"], e["type"], e["data"]) for e in relayed_events] == [
        (e["seq"], e["type"], e["data"]) for e in child_events
    ]
    step1 = [e["type"] for e in parent_events if e["step"] == 1]
    assert step1[:3] == ["step_start", "tool_call", "subagent_start"]
    assert step1[-3:] == ["subagent_finish", "tool_result", "step_finish"]
    assert child_events[-1]["type"] == "finish"


def test_writing_a_steps_keyed_events_again_writes_nothing_and_an_ended_run_gets_none(executor):
    gate = Gate()
    agent_ = define_agent(unique("keyed"), tools=[gate.tool()])
    use_model(executor, calls(call("g1", "wait_here")), text("hello"))
    handle = executor.execute(agent_, "go")
    gate.wait_entered()
    sid = handle.session_id
    writer = LiveEventWriter(executor.database_url)
    wait_for(lambda: any(e["type"] == "tool_call" for e in events(executor, sid)), what="the model's tool call")
    before = events(executor, sid)
    again = [KeyedEvent(key="1.1.step_start", event=StepStartEvent(step=1))]
    new = KeyedEvent(key="1.1.extra", event=StepStartEvent(step=1))
    writer.write(sid, 1, 1, again)
    writer.write(sid, 1, 1, [new])
    writer.write(sid, 1, 1, [new])
    assert writer.flush(timeout=RESULT_TIMEOUT)
    after = events(executor, sid)
    assert after[: len(before)] == before and len(after) == len(before) + 1
    assert after[-1]["seq"] == before[-1]["seq"] + 1
    keys = [r["key"] for r in rows(executor, "SELECT key FROM helix.events WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %(s)s) ORDER BY seq", s=sid)]
    assert keys[:3] == [None, "1.1.step_start", "1.1.call:g1"] and keys[-1] == "1.1.extra"
    session = rows(executor, "SELECT event_seq FROM helix.sessions WHERE id = %(s)s", s=sid)[0]
    assert session["event_seq"] == after[-1]["seq"]

    gate.open()
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    ended = events(executor, sid)
    writer.write(sid, 1, 2, [KeyedEvent(key="1.2.late", event=StepStartEvent(step=2))])
    assert writer.flush(timeout=RESULT_TIMEOUT)
    assert events(executor, sid) == ended and ended[-1]["type"] == "finish"  # the stream still ends with the run's end


def test_the_writer_tells_a_committing_step_whether_it_wrote_any_of_its_events(executor):
    """A step whose events were all still held when it commits is told none were written
    (its commit need not look their keys up); one whose events went is told so, once."""
    gate = Gate()
    use_model(executor, calls(call("g1", "wait_here")), text("hello"))
    handle = executor.execute(define_agent(unique("told"), tools=[gate.tool()]), "go")
    gate.wait_entered()
    sid = handle.session_id
    writer = LiveEventWriter(executor.database_url)
    held = KeyedEvent(key="1.1.held", event=StepStartEvent(step=1))
    sent = KeyedEvent(key="1.1.sent", event=StepStartEvent(step=1))

    writer.write(sid, 1, 1, [held])
    assert writer.committing(sid, 1, 1) is False
    writer.write(sid, 1, 1, [sent])
    assert writer.flush(timeout=RESULT_TIMEOUT)
    told = [writer.committing(sid, 1, 1), writer.committing(sid, 1, 1)]

    keys = {r["key"] for r in rows(executor, "SELECT key FROM helix.events WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %(s)s)", s=sid)}
    assert told == [True, False]
    assert "1.1.sent" in keys and "1.1.held" not in keys
    gate.open()
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"


def test_a_suspensions_request_follows_its_tool_call_even_when_the_writer_lags(executor):
    """The model's ``tool_call`` is handed to the writer thread; the suspension that makes
    the call wait writes ``tool_approval_request`` in a transaction of its own. The
    suspension waits for the writer, so the stream holds the call before its request
    (a chat client pairs the request with the call it already has)."""
    done = define_agent(unique("lag"))
    use_model(executor, text("done"))
    other = executor.execute(done, "go")
    other.result(timeout=RESULT_TIMEOUT)
    refund = define_tool("refund", "Refund.", Pause, lambda args, ctx: {"ok": True}, require_approval=True)
    gated = define_agent(unique("lag"), tools=[refund])
    executor.register(gated)
    use_model(executor, calls(call("r1", "refund", {"label": "A-1"})), text("refused"))
    with executor.pool.connection() as lock, lock.transaction(force_rollback=True):
        # the writer thread blocks on another session's row, with the run's tool_call behind it
        lock.execute("SELECT 1 FROM helix.sessions WHERE id = %(id)s FOR UPDATE", {"id": other.session_id})
        executor.runtime.live_events.write(other.session_id, 1, 1, [KeyedEvent.at(1, 1, "lag", CustomEvent(name="lag"))])
        handle = executor.execute(gated, "refund A-1")
        held = time.monotonic() + 2.0
        while session_status(executor, handle.session_id) != "awaiting_approval" and time.monotonic() < held:
            time.sleep(0.02)
    wait_for(lambda: session_status(executor, handle.session_id) == "awaiting_approval", what="the suspension")
    kinds = [e["type"] for e in events(executor, handle.session_id)]
    assert kinds.index("tool_call") < kinds.index("tool_approval_request"), kinds
    executor.submit_tool_result(handle.session_id, ApprovalResponse(tool_call_id="r1", approved=False))
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
