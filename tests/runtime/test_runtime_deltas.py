"""Token deltas reach consumers live: a model streamed by a stub server over real HTTP
(OpenAI SSE chunks), published with NOTIFY, followed by another process
(``helix-dbos tail --deltas``) and by ``executor.stream(deltas=True)``."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
from pydantic import BaseModel
from llm_stub_server import StubLLMServer, openai_stream

from helix_dbos import ToolContext, create_sub_agent_tool, define_agent, define_tool
from helix_dbos._database import libpq_url
from helix_dbos._deltas import DeltaRecord
from helix_dbos.llm import LiteLLMAdapter
from helix_dbos._store.delta_channels import DeltaPublisher, listen_statement
from helix_dbos.types import LLMConfig
from runtime_testkit import RESULT_TIMEOUT, Gate, agent, call, calls, family_model, sub, text, unique, use_model, wait_for

HELIX = Path(sys.executable).with_name("helix-dbos")
PIECES = ["Hel", "lo, ", "wor", "ld", "!"]


def follow(command: list[str]) -> tuple[subprocess.Popen[str], queue.Queue[str]]:
    """Start ``command`` and collect its stdout lines (None at the end) on a queue."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue[Any] = queue.Queue()

    def pump() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return process, lines


def drain(process: subprocess.Popen[str], lines: queue.Queue[Any]) -> list[str]:
    out = []
    while (line := lines.get(timeout=RESULT_TIMEOUT)) is not None:
        out.append(line)
    assert process.wait(timeout=RESULT_TIMEOUT) == 0, process.stderr.read() if process.stderr else ""
    return out


def test_deltas_of_a_streaming_model_reach_another_process_in_order_before_the_step_commits(executor):
    gate = Gate()
    agent = define_agent(unique("deltas"), tools=[gate.tool()], llm_config=LLMConfig(model="openai/gpt-4o"))
    with StubLLMServer() as stub:
        stub.add(
            openai_stream(tool_calls=[("w1", "wait_here", ["{}"])], finish_reason="tool_calls"),
            openai_stream(content=PIECES, chunk_delay=0.05),
        )
        previous, executor.llm = executor.llm, LiteLLMAdapter(api_base=stub.openai_base, api_key="sk-test")
        try:
            sid = unique("deltas-session")
            handle = executor.execute(agent, "go", session_id=sid)
            gate.wait_entered()
            url = executor.database_url
            as_json, json_lines = follow([str(HELIX), "tail", sid, "--deltas", "--json", "--database-url", url])
            human, human_lines = follow([str(HELIX), "tail", sid, "--deltas", "--database-url", url])
            first_json, first_human = json_lines.get(timeout=RESULT_TIMEOUT), human_lines.get(timeout=RESULT_TIMEOUT)
            assert "run_start" in first_json and "run_start" in first_human  # both listen now
            gate.open()
            handle.result(timeout=RESULT_TIMEOUT)
            items = [json.loads(line) for line in [first_json, *drain(as_json, json_lines)]]
            printed = first_human + "".join(drain(human, human_lines))
        finally:
            executor.llm = previous

    deltas = [i for i in items if i["type"] == "delta"]
    assert [d["text"] for d in deltas if d["kind"] == "text"] == PIECES
    assert [d["index"] for d in deltas if d["step"] == 2] == list(range(len(PIECES)))
    assert {(d["run"], d["step"], d["attempt"]) for d in deltas if d["step"] == 2} == {(1, 2, deltas[-1]["attempt"])}
    assert all("seq" not in d for d in deltas)
    commit = next(n for n, i in enumerate(items) if i["type"] == "step_finish" and i["step"] == 2)
    assert max(n for n, i in enumerate(items) if i["type"] == "delta") < commit  # every delta before the commit
    durable_text = next(i for i in items if i["type"] == "text" and i["step"] == 2)
    assert durable_text["data"]["content"] == "".join(PIECES)  # the durable event has the whole message
    assert "text (live)" in printed and "Hello, world!\n" in printed


def test_executor_stream_merges_mock_deltas_with_durable_events(executor):
    gate = Gate()
    agent = define_agent(unique("deltas"), tools=[gate.tool()])
    mock = use_model(executor, calls(call("w1", "wait_here")), text("streamed by the mock"))
    mock.stream_chunk_chars = 5
    sid = unique("deltas-session")
    handle = executor.execute(agent, "go", session_id=sid)
    gate.wait_entered()
    stream = executor.stream(sid, deltas=True)
    first = next(stream)  # the stream reads after it LISTENs: it is listening now
    gate.open()
    items = [first, *stream]
    handle.result(timeout=RESULT_TIMEOUT)

    deltas = [i for i in items if isinstance(i, DeltaRecord)]
    assert [d.text for d in deltas] == ["strea", "med b", "y the", " mock"]
    assert [d.index for d in deltas] == [0, 1, 2, 3] and {d.step for d in deltas} == {2}
    at = [n for n, i in enumerate(items) if isinstance(i, DeltaRecord)]
    finished = [n for n, i in enumerate(items) if i.type == "step_finish"]
    assert finished[0] < at[0] and at[-1] < finished[1]  # after step 1's commit, before step 2's
    assert at == list(range(at[0], at[0] + 4))  # no durable event between them


def test_sub_agents_deltas_reach_every_stream_above_them_tagged_while_they_run(executor):
    gate = Gate()
    grandchild = agent(unique("grandchild"), tools=[gate.tool()])
    child = agent(unique("child"), tools=[create_sub_agent_tool(grandchild)])
    parent = agent(unique("parent"), tools=[create_sub_agent_tool(child)])
    mock = family_model(executor, {
        parent: [calls(call("p1", f"subagent__{child.name}", {"input": "go"})), text("parent done")],
        child: [calls(call("c1", f"subagent__{grandchild.name}", {"input": "go"})), text("child says hi")],
        grandchild: [calls(call("g1", "wait_here")), text("grandchild says hello")],
    })
    mock.stream_chunk_chars = 4
    sid = unique("family")
    child_id, grandchild_id = sub(sid, "p1"), sub(sub(sid, "p1"), "c1")
    handle = executor.execute(parent, "go", session_id=sid)
    gate.wait_entered()
    url = executor.database_url
    root_tail, root_lines = follow([str(HELIX), "tail", sid, "--deltas", "--json", "--database-url", url])
    child_tail, child_lines = follow([str(HELIX), "tail", child_id, "--deltas", "--json", "--database-url", url])
    human, human_lines = follow([str(HELIX), "tail", sid, "--deltas", "--database-url", url])
    firsts = [lines.get(timeout=RESULT_TIMEOUT) for lines in (root_lines, child_lines, human_lines)]
    assert all("run_start" in line for line in firsts)  # all three listen now
    gate.open()
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    root_items = [json.loads(line) for line in [firsts[0], *drain(root_tail, root_lines)]]
    child_items = [json.loads(line) for line in [firsts[1], *drain(child_tail, child_lines)]]
    printed = firsts[2] + "".join(drain(human, human_lines))

    def said(items: list[dict[str, Any]], session_id: str) -> str:
        return "".join(i["text"] for i in items if i["type"] == "delta" and i["session_id"] == session_id)

    assert said(root_items, grandchild_id) == "grandchild says hello"
    assert said(root_items, child_id) == "child says hi"
    assert said(root_items, sid) == "parent done"
    assert said(child_items, grandchild_id) == "grandchild says hello" and said(child_items, child_id) == "child says hi"
    assert said(child_items, sid) == ""  # deltas go up the tree, never down
    for session_id in (child_id, grandchild_id):
        indexes = [i["index"] for i in root_items if i["type"] == "delta" and i["session_id"] == session_id]
        assert indexes == list(range(len(indexes)))  # in the order produced
    child_end = next(
        n for n, i in enumerate(root_items) if i["type"] == "subagent_finish" and i["data"]["session_id"] == child_id
    )
    assert max(n for n, i in enumerate(root_items) if i["type"] == "delta" and i["session_id"] != sid) < child_end
    assert f"text (live)            {grandchild_id}: grandchild says hello" in printed


def test_a_stream_without_deltas_yields_only_durable_events(executor):
    agent = define_agent(unique("deltas"))
    use_model(executor, text("no deltas please"))
    handle = executor.execute(agent, "go")
    handle.result(timeout=RESULT_TIMEOUT)

    items = list(executor.stream(handle.session_id))

    assert items and all(not isinstance(i, DeltaRecord) for i in items)


def test_a_long_delta_is_published_in_pieces_a_listener_rejoins_in_order(executor):
    sid = unique("deltas-session")
    long_text = "0123456789€" * 2000
    with psycopg.connect(libpq_url(executor.database_url), autocommit=True) as listener:
        listener.execute(listen_statement(sid))
        sent = executor.runtime.deltas.publish(
            DeltaRecord(session_id=sid, run=1, step=1, attempt=1, index=10, kind="text", text=long_text)
        )
        assert executor.runtime.deltas.flush(timeout=RESULT_TIMEOUT)
        notes = list(listener.notifies(timeout=2, stop_after=sent))

    pieces = [DeltaRecord.from_payload(note.payload) for note in notes]
    assert sent > 1 and len(pieces) == sent
    assert [p.index for p in pieces] == list(range(10, 10 + sent))
    assert "".join(p.text for p in pieces) == long_text


def test_publishing_while_the_database_is_unreachable_drops_deltas_and_never_raises(caplog):
    publisher = DeltaPublisher("postgresql://postgres@127.0.0.1:1/nowhere")

    publisher.publish(DeltaRecord(session_id="s1", run=1, step=1, attempt=1, index=0, kind="text", text="lost"))

    assert publisher.flush(timeout=RESULT_TIMEOUT)
    assert "could not publish 1 token deltas (dropped)" in caplog.text


class Log(BaseModel):
    labels: list[str] = []


class Labels(BaseModel):
    labels: list[str]


def test_another_process_sees_each_update_of_a_long_tool_while_it_runs_and_none_of_a_quick_one(executor):
    updated: list[tuple[str, float]] = []

    def slow(args: Labels, ctx: ToolContext) -> dict[str, Any]:
        for label in args.labels:
            ctx.update_state(lambda draft: draft.labels.append(label))
            updated.append((label, time.monotonic()))
            time.sleep(1.0)
        return {"noted": args.labels}

    def quick(args: Labels, ctx: ToolContext) -> dict[str, Any]:
        for label in args.labels:
            ctx.update_state(lambda draft: draft.labels.append(label))
        return {"noted": args.labels}

    gate = Gate()
    tools = [define_tool("slow", "Note slowly.", Labels, slow), define_tool("quick", "Note at once.", Labels, quick),
             gate.tool()]
    noting = define_agent(unique("live-state"), tools=tools, state_schema=Log)
    use_model(executor, calls(call("w1", "wait_here")),
              calls(call("s1", "slow", {"labels": ["a", "b", "c"]}), call("q1", "quick", {"labels": ["x", "y"]})),
              text("noted"))
    sid = unique("live-state")
    handle = executor.execute(noting, "go", session_id=sid)
    gate.wait_entered()
    tail = subprocess.Popen([str(HELIX), "tail", sid, "--deltas", "--json", "--database-url", executor.database_url],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    arrived: list[tuple[float, dict[str, Any]]] = []

    def pump() -> None:
        assert tail.stdout is not None
        for line in tail.stdout:
            arrived.append((time.monotonic(), json.loads(line)))

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        wait_for(lambda: arrived, timeout=RESULT_TIMEOUT)  # the reader listens
        gate.open()
        assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
        reader.join(timeout=RESULT_TIMEOUT)
    finally:
        gate.open()
        if tail.poll() is None:
            tail.kill()
    slow_done = next(at for at, item in arrived if item["type"] == "tool_result" and item["data"]["tool_call_id"] == "s1")
    states = [(at, item) for at, item in arrived if item["type"] == "delta" and item["kind"] == "state"]
    seen = [(at, op["value"]) for at, item in states if item["tool_call_id"] == "s1" for op in item["patch"]]
    assert [label for _, label in seen] == ["a", "b", "c"]  # each update, in order
    assert all(at < slow_done for at, _ in seen)  # while the tool ran
    for (label, at), (seen_at, _) in zip(updated, seen):
        assert seen_at - at < 0.9, (label, seen_at - at)  # before the tool's next update
    assert not [item for _, item in states if item["tool_call_id"] == "q1"]  # the quick tool's state came with its step
    assert executor.get_session(sid).state == {"labels": ["a", "b", "c", "x", "y"]}
