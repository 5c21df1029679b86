"""The UI message stream translator on its own: events and deltas in, AI SDK chunks out."""

from __future__ import annotations

from typing import Any

from helix_dbos._deltas import DeltaRecord
from helix_dbos._ui_stream import Record, UIMessageStream, encode


def ev(seq: int, type: str, step: int = 1, run: int = 1, **data: Any) -> Record:
    return Record(seq, run, step, type, data)


def delta(text: str, index: int, attempt: int = 1, step: int = 1, kind: str = "text", **extra: Any) -> DeltaRecord:
    return DeltaRecord(session_id="s", run=1, step=step, attempt=attempt, index=index, kind=kind, text=text, **extra)  # type: ignore[arg-type]


def feed(ui: UIMessageStream, *items: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for item in items:
        out += ui.delta(item) if isinstance(item, DeltaRecord) else ui.event(item)
    return out


def types(chunks: list[dict[str, Any]]) -> list[str]:
    return [c["type"] for c in chunks]


def test_live_deltas_then_the_durable_text_close_one_part_without_repeating_text():
    ui = UIMessageStream("s", 1)
    chunks = feed(ui, ev(1, "step_start"), delta("Hel", 0), delta("lo", 1), ev(2, "text", content="Hello!"))
    assert types(chunks) == ["start-step", "text-start", "text-delta", "text-delta", "text-delta", "text-end"]
    assert "".join(c["delta"] for c in chunks if c["type"] == "text-delta") == "Hello!"


def test_a_reader_that_joined_mid_step_shows_the_whole_text_once_it_is_durable():
    ui = UIMessageStream("s", 1)
    chunks = feed(ui, ev(1, "step_start"), delta("lo", 3), delta(" there", 4), ev(2, "text", content="Hello there"))
    assert [c for c in chunks if c["type"] == "text-delta"] == [{"type": "text-delta", "id": "text-1", "delta": "Hello there"}]


def test_a_newer_attempt_resets_the_step_and_a_missed_delta_is_filled_from_the_durable_text():
    ui = UIMessageStream("s", 1)
    chunks = feed(
        ui, ev(1, "step_start"), delta("Once ", 0), delta("upon", 1),   # attempt 1, then the worker died
        delta("Twice", 0, attempt=2), delta(" a time", 2, attempt=2),     # attempt 2; index 1 was dropped
        ev(2, "text", content="Twice upon a time"),
    )
    assert types(chunks) == [
        "start-step", "text-start", "text-delta", "text-delta", "reset-step", "text-start", "text-delta",
        "text-delta", "text-end",
    ]
    assert chunks[-2]["delta"] == " upon a time"


def test_deltas_of_another_run_or_a_sub_agent_are_left_out():
    ui = UIMessageStream("s", 1)
    child = DeltaRecord(session_id="s-sub-c1", run=1, step=1, attempt=1, index=0, kind="text", text="child")
    assert feed(ui, ev(1, "step_start"), child, delta("x", 0).model_copy(update={"run": 2})) == [{"type": "start-step"}]


def test_a_gated_call_pauses_the_message_once_every_other_call_has_its_result():
    ui = UIMessageStream("s", 1)
    feed(
        ui, ev(1, "step_start"),
        ev(2, "tool_call", tool_call_id="a", tool_name="refund", input={}),
        ev(3, "tool_call", tool_call_id="b", tool_name="weather", input={}),
        ev(4, "tool_approval_request", tool_call_id="a", tool_name="refund", input={}),
    )
    assert ui.waiting == frozenset()  # b still runs
    assert feed(ui, ev(5, "tool_result", tool_call_id="b", tool_name="weather", content='{"t":1}')) == [
        {"type": "tool-output-available", "toolCallId": "b", "output": {"t": 1}}
    ]
    assert ui.waiting == {"a"} and ui.paused_at == {"a": 5}
    ui.answered(["a"])
    assert ui.waiting == frozenset()
    denied = feed(ui, ev(6, "tool_result", tool_call_id="a", tool_name="refund", is_error=True,
                         content="Tool call a was not approved by the user: no"))
    assert denied == [{"type": "tool-output-denied", "toolCallId": "a"}]


def test_a_request_read_before_its_call_follows_the_call_and_still_pauses_the_message():
    ui = UIMessageStream("s", 1, client_tools=frozenset({"ask"}))
    chunks = feed(
        ui, ev(1, "step_start"),
        ev(2, "tool_approval_request", tool_call_id="a", tool_name="refund", input={}),
        ev(3, "tool_start", tool_call_id="q", tool_name="ask", input={}),
        ev(4, "tool_call", tool_call_id="a", tool_name="refund", input={}),
        ev(5, "tool_call", tool_call_id="q", tool_name="ask", input={}),
    )
    assert types(chunks) == ["start-step", "tool-input-available", "tool-approval-request", "tool-input-available"]
    assert ui.waiting == {"a", "q"} and ui.paused_at == {"a": 5, "q": 5}


def test_tools_the_server_runs_are_provider_executed_and_client_tools_are_not():
    ui = UIMessageStream("s", 1, client_tools=frozenset({"ask"}))
    chunks = feed(ui, ev(1, "tool_call", tool_call_id="a", tool_name="ask", input={}),
                  ev(2, "tool_call", tool_call_id="b", tool_name="search", input={}),
                  ev(3, "tool_call", tool_call_id="f", tool_name="__finish__", input={"x": 1}))
    assert [(c["toolCallId"], c["providerExecuted"]) for c in chunks if c["type"] == "tool-input-available"] == [
        ("a", False), ("b", True)
    ]


def test_state_is_one_data_part_replaced_by_live_patches_and_then_by_the_commit():
    ui = UIMessageStream("s", 1, state={"notes": []})
    assert ui.start()[1] == {"type": "data-state", "id": "state", "data": {"notes": []}}
    live = delta("", 0, kind="state", tool_call_id="t", patch=[{"op": "add", "path": "/notes/-", "value": "a"}])
    assert feed(ui, ev(1, "step_start"), live)[-1]["data"] == {"notes": ["a"]}
    committed = ev(2, "state_patch", patches=[{"op": "add", "path": "/notes/-", "value": "a"}])
    assert feed(ui, committed) == [{"type": "data-state", "id": "state", "data": {"notes": ["a"]}}]
    assert feed(ui, live) == []  # a late live patch of a committed step changes nothing


def test_run_ends_and_sub_agents():
    ui = UIMessageStream("s", 1)
    sub = feed(ui, ev(1, "subagent_start", tool_call_id="c", session_id="s-c", agent="helper"),
               ev(2, "subagent_finish", tool_call_id="c", session_id="s-c", status="completed"))
    assert sub[-1] == {"type": "data-subagent", "id": "s-c",
                       "data": {"sessionId": "s-c", "agent": "helper", "toolCallId": "c", "status": "completed"}}
    end = feed(ui, ev(3, "finish", output="ok", usage={"total_tokens": 3}), ev(4, "text", content="late"))
    assert end == [{"type": "finish", "finishReason": "stop",
                    "messageMetadata": {"status": "completed", "usage": {"total_tokens": 3}, "output": "ok"}}]
    assert ui.ended and encode(end[0]).startswith('data: {"type":"finish"')
    assert feed(UIMessageStream("s", 1), ev(1, "error", error="boom")) == [{"type": "error", "errorText": "boom"}]
    assert types(feed(UIMessageStream("s", 1), ev(1, "aborted", reason="stopped"))) == ["abort"]
