"""The durable event stream: what a run writes to ``helix.events``, in what order, and how
readers follow it, live, from this process and from another one."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from typing import Any

from pydantic import BaseModel

from helix_dbos import ToolContext, define_agent, define_tool
from runtime_testkit import (
    RESULT_TIMEOUT,
    Gate,
    call,
    calls,
    events,
    finish,
    text,
    unique,
    use_model,
)


class Note(BaseModel):
    text: str


class Notes(BaseModel):
    notes: list[str] = []


def take_note(i: Note, ctx: ToolContext) -> dict:
    ctx.emit("progress", {"percent": 50})
    ctx.update_state(lambda draft: draft.notes.append(i.text))
    return {"saved": i.text}


NOTE = define_tool("note", "Take a note.", Note, take_note)


def note_agent(*extra_tools: Any, **options: Any) -> Any:
    return define_agent(unique("stream"), tools=[NOTE, *extra_tools], state_schema=Notes, **options)


def assert_well_formed(stream: list[Any]) -> None:
    seqs = [e.seq if hasattr(e, "seq") else e["seq"] for e in stream]
    assert seqs == sorted(set(seqs)), f"seq must strictly increase without duplicates: {seqs}"


def test_stream_yields_the_durable_events_of_a_run_in_order(executor):
    agent = note_agent()
    use_model(executor, calls(call("n1", "note", {"text": "a"}), content="noting"), text("all done"))
    handle = executor.execute(agent, "go")
    handle.result(timeout=RESULT_TIMEOUT)

    stream = list(executor.stream(handle.session_id))
    assert_well_formed(stream)
    assert [e.seq for e in stream] == list(range(1, len(stream) + 1))
    assert [(e.step, e.type) for e in stream] == [
        (0, "run_start"),
        (1, "step_start"),
        (1, "text"),
        (1, "tool_call"),
        (1, "custom"),
        (1, "tool_result"),
        (1, "state_patch"),
        (1, "step_finish"),
        (2, "step_start"),
        (2, "text"),
        (2, "step_finish"),
        (2, "finish"),
    ]
    by_type = {e.type: e.data for e in stream}
    assert by_type["run_start"]["input"] == "go"
    assert by_type["tool_call"] == {"tool_call_id": "n1", "tool_name": "note", "input": {"text": "a"}}
    assert by_type["custom"] == {"name": "progress", "data": {"percent": 50}, "tool_call_id": "n1"}
    assert by_type["tool_result"]["tool_call_id"] == "n1" and by_type["tool_result"]["is_error"] is False
    assert json.loads(by_type["tool_result"]["content"]) == {"saved": "a"}
    assert by_type["state_patch"] == {"patches": [{"op": "add", "path": "/notes/-", "value": "a"}]}
    assert by_type["finish"]["output"] == "all done"
    assert {e.run for e in stream} == {1}
    # The stream is exactly the table.
    assert [(e.seq, e.type) for e in stream] == [(e["seq"], e["type"]) for e in events(executor, handle.session_id)]


def test_finish_tool_calls_are_not_streamed_and_failures_end_with_error(executor):
    class Out(BaseModel):
        answer: str

    agent = define_agent(unique("stream-finish"), output_schema=Out)
    use_model(executor, finish("f1", answer="x"))
    handle = executor.execute(agent, "go")
    handle.result(timeout=RESULT_TIMEOUT)
    stream = list(executor.stream(handle.session_id))
    assert [e.type for e in stream] == ["run_start", "step_start", "step_finish", "finish"]
    assert stream[-1].data["output"] == {"answer": "x"}

    failing = define_agent(unique("stream-fail"))
    use_model(executor, {"type": "error", "error": "model down"})
    handle = executor.execute(failing, "go")
    handle.result(timeout=RESULT_TIMEOUT)
    stream = list(executor.stream(handle.session_id))
    assert stream[-1].type == "error" and stream[-1].data["error"] == "model down"


def test_from_seq_and_multi_run_sessions(executor):
    agent = note_agent()
    use_model(executor, calls(call("n1", "note", {"text": "a"})), text("one"), text("two"))
    first = executor.execute(agent, "go")
    first.result(timeout=RESULT_TIMEOUT)
    executor.execute(agent, "again", session_id=first.session_id).result(timeout=RESULT_TIMEOUT)
    sid = first.session_id
    everything = list(executor.stream(sid, until_run_end=False, follow=False))
    assert_well_formed(everything)
    assert [e.type for e in everything].count("run_start") == 2

    # By default a reader stops at the end of the first run it reads.
    run1 = list(executor.stream(sid))
    assert run1[-1].type == "finish" and run1[-1].data["output"] == "one"
    assert {e.run for e in run1} == {1}

    # A run's start_seq is where its events begin.
    run2_start = executor.list_runs(sid)[1].start_seq
    run2 = list(executor.stream(sid, from_seq=run2_start))
    assert run2[0].type == "run_start" and run2[0].seq == run2_start
    assert run2[-1].type == "finish" and run2[-1].data["output"] == "two"
    assert {e.run for e in run2} == {2}
    assert run1 + run2 == everything

    middle = everything[3].seq
    assert [e.seq for e in executor.stream(sid, from_seq=middle, until_run_end=False, follow=False)] == [
        e.seq for e in everything[3:]
    ]
    assert list(executor.stream(sid, from_seq=everything[-1].seq + 1, follow=False)) == []


def test_a_reader_in_this_process_follows_a_run_live(executor):
    gate = Gate()
    agent = note_agent(gate.tool())
    use_model(executor, calls(call("n1", "note", {"text": "a"})), calls(call("g1", "wait_here")), text("done"))
    handle = executor.execute(agent, "go")
    gate.wait_entered()
    received: queue.Queue[Any] = queue.Queue()

    def follow() -> None:
        for event in executor.stream(handle.session_id, idle_timeout=RESULT_TIMEOUT):
            received.put(event)

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    seen = take_until(received, lambda e: e.type == "step_finish" and e.step == 1)
    assert not gate.opened.is_set()  # the run is still inside step 2
    gate.open()
    seen += take_until(received, lambda e: e.type == "finish")
    reader.join(10)
    assert not reader.is_alive()
    assert_well_formed(seen)
    assert [(e.seq, e.type) for e in seen] == [(e["seq"], e["type"]) for e in events(executor, handle.session_id)]


READER_SCRIPT = """
import json, sys
from helix_dbos._client.streams import follow_events
from helix_dbos._store.pools import create_pool

url, session_id, from_seq = sys.argv[1], sys.argv[2], int(sys.argv[3])
for event in follow_events(url, session_id, from_seq, pool=create_pool(url), idle_timeout=30):
    print(json.dumps({"seq": event.seq, "run": event.run, "step": event.step, "type": event.type}), flush=True)
"""


def test_a_reader_in_another_process_receives_events_while_the_run_is_in_progress(executor):
    gate = Gate()
    agent = note_agent(gate.tool())
    use_model(executor, calls(call("n1", "note", {"text": "a"})), calls(call("g1", "wait_here")), text("done"))
    sid = unique("stream-session")
    # The reader starts before the session even exists, and waits for it.
    reader = subprocess.Popen(
        [sys.executable, "-c", READER_SCRIPT, executor.database_url, sid, "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        lines: queue.Queue[Any] = queue.Queue()
        threading.Thread(target=lambda: [lines.put(json.loads(line)) for line in reader.stdout], daemon=True).start()
        handle = executor.execute(agent, "go", session_id=sid)
        gate.wait_entered()
        live = take_until(lines, lambda e: e["type"] == "step_finish" and e["step"] == 1)
        # Step 1's events arrived while the run is blocked inside step 2.
        assert not gate.opened.is_set()
        assert executor.get_session(sid).status == "active"
        assert [e["type"] for e in live][:2] == ["run_start", "step_start"]
        gate.open()
        rest = take_until(lines, lambda e: e["type"] == "finish")
        assert reader.wait(timeout=15) == 0, reader.stderr.read()
        assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    finally:
        if reader.poll() is None:
            reader.kill()
            reader.wait()
    received = live + rest
    assert_well_formed(received)
    assert [(e["seq"], e["type"], e["step"]) for e in received] == [
        (e["seq"], e["type"], e["step"]) for e in events(executor, sid)
    ]


def take_until(source: queue.Queue[Any], last: Any, timeout: float = 15.0) -> list[Any]:
    """Items from ``source`` up to and including the first for which ``last`` holds."""
    taken = []
    while True:
        try:
            item = source.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no matching event within {timeout}s; got {taken}") from None
        taken.append(item)
        if last(item):
            return taken
