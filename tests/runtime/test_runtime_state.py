"""Custom state: schema defaults, refused updates, time travel and the RFC 6902 patch log."""

from __future__ import annotations

import json
from typing import Any

import jsonpatch
import pytest
from pydantic import BaseModel, Field

from helix_dbos import HelixError, ToolContext, define_agent, define_tool
from helix_dbos._durable import loop
from runtime_testkit import (
    RESULT_TIMEOUT,
    assert_paired,
    call,
    calls,
    result_for,
    rows,
    text,
    unique,
    use_model,
)


class Board(BaseModel):
    notes: list[str] = []
    count: int = Field(default=0, ge=0)
    owner: dict[str, str] = {"name": "nobody"}


class Change(BaseModel):
    kind: str
    value: Any = None


def change_board(i: Change, ctx: ToolContext) -> dict:
    """Applies one kind of change to the board."""

    def apply(draft: Any) -> None:
        if i.kind == "note":
            draft.notes.append(i.value)
        elif i.kind == "count":
            draft.count = i.value
        elif i.kind == "owner":
            draft.owner.name = i.value
        elif i.kind == "note_and_count":
            draft.notes.append(i.value)
            draft.count += 1
        elif i.kind == "set_of_things":
            draft.notes.append({1, 2})  # not JSON
        elif i.kind == "extra_key":
            draft.extra = object()  # not JSON either

    ctx.update_state(apply)
    return {"state": ctx.get_state().dump()}


CHANGE = define_tool("change", "Change the board.", Change, change_board)


def run(executor: Any, agent: Any) -> tuple[Any, Any]:
    handle = executor.execute(agent, "go")
    return handle, handle.result(timeout=RESULT_TIMEOUT)


def test_state_schema_defaults_are_the_initial_state(executor):
    seen: list[Any] = []

    def look(i: Change, ctx: ToolContext) -> dict:
        seen.append(ctx.get_state().dump())
        return {}

    agent = define_agent(
        unique("state-init"),
        system_prompt=lambda state: f"owner={state['owner']['name']} count={state['count']}",
        tools=[define_tool("look", "Look.", Change, look)],
        state_schema=Board,
    )
    mock = use_model(executor, calls(call("c1", "look", {"kind": "x"})), text("done"))
    handle, result = run(executor, agent)
    assert result.status == "completed"
    defaults = {"notes": [], "count": 0, "owner": {"name": "nobody"}}
    assert seen == [defaults]
    assert mock.inputs[0].messages[0].content == "owner=nobody count=0"
    assert executor.get_session(handle.session_id, at_step=0).state == defaults
    assert executor.get_session(handle.session_id).state == defaults
    [snapshot] = rows(executor, "SELECT step, state FROM helix.state_snapshots WHERE session_num = helix.session_num(%(s)s)", s=handle.session_id)
    assert snapshot == {"step": 0, "state": defaults}


def test_agent_without_state_schema_starts_from_an_empty_state(executor):
    agent = define_agent(unique("state-none"))
    use_model(executor, text("hi"))
    handle, _ = run(executor, agent)
    assert executor.get_session(handle.session_id).state == {}


@pytest.mark.parametrize(
    "bad_change, error_words",
    [
        ({"kind": "count", "value": -5}, ["count", "greater than or equal"]),  # violates ge=0
        ({"kind": "count", "value": "many"}, ["count"]),  # wrong type
        ({"kind": "set_of_things"}, ["JSON"]),  # a set is not JSON
        ({"kind": "extra_key"}, ["JSON"]),  # nor is an arbitrary object
    ],
)
def test_refused_state_update_is_the_tools_error_and_the_state_is_unchanged(executor, bad_change, error_words):
    agent = define_agent(unique("state-bad"), tools=[CHANGE], state_schema=Board)
    mock = use_model(
        executor,
        calls(call("c1", "change", {"kind": "note", "value": "kept"})),
        calls(call("c2", "change", bad_change)),
        calls(call("c3", "change", {"kind": "count", "value": 3})),
        text("done"),
    )
    handle, result = run(executor, agent)
    assert result.status == "completed"
    messages = executor.get_session(handle.session_id).messages
    refused = result_for(messages, "c2")
    assert refused.is_error, refused.content
    for word in error_words:
        assert word in refused.content
    assert refused in mock.get_last_input().messages  # the model was told
    assert_paired(messages)
    # The refused step changed nothing: no patch row, the state after it is the one before.
    assert executor.get_session(handle.session_id, at_step=2).state == executor.get_session(handle.session_id, at_step=1).state
    patched_steps = [r["step"] for r in rows(executor, "SELECT step FROM helix.state_patches WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %(s)s) ORDER BY step", s=handle.session_id)]
    assert patched_steps == [1, 3]
    assert executor.get_session(handle.session_id).state == {"notes": ["kept"], "count": 3, "owner": {"name": "nobody"}}


SCRIPT = [
    calls(call("c1", "change", {"kind": "note", "value": "a"})),
    calls(call("c2", "change", {"kind": "owner", "value": "ada"}), call("c3", "change", {"kind": "note_and_count", "value": "b"})),
    calls(call("c4", "change", {"kind": "count", "value": 7})),
    text("no change in this step"),
]
EXPECTED = [
    {"notes": [], "count": 0, "owner": {"name": "nobody"}},
    {"notes": ["a"], "count": 0, "owner": {"name": "nobody"}},
    {"notes": ["a", "b"], "count": 1, "owner": {"name": "ada"}},
    {"notes": ["a", "b"], "count": 7, "owner": {"name": "ada"}},
    {"notes": ["a", "b"], "count": 7, "owner": {"name": "ada"}},
]


def test_get_session_at_every_step_matches_what_the_tools_saw(executor):
    agent = define_agent(unique("state-travel"), tools=[CHANGE], state_schema=Board)
    use_model(executor, *SCRIPT)
    handle, result = run(executor, agent)
    assert (result.status, result.step_count) == ("completed", 4)
    sid = handle.session_id
    assert [executor.get_session(sid, at_step=n).state for n in range(5)] == EXPECTED
    assert executor.get_session(sid).state == EXPECTED[-1]
    # Each tool reported the state it left; it matches the rebuilt state of its step
    # (c3 ran in parallel with c2, from the state of step 1).
    messages = executor.get_session(sid).messages
    assert json.loads(result_for(messages, "c1").content)["state"] == EXPECTED[1]
    assert json.loads(result_for(messages, "c4").content)["state"] == EXPECTED[3]
    assert json.loads(result_for(messages, "c3").content)["state"] == {"notes": ["a", "b"], "count": 1, "owner": {"name": "nobody"}}


def test_patch_log_is_rfc6902_and_replays_to_the_final_state(executor):
    agent = define_agent(unique("state-log"), tools=[CHANGE], state_schema=Board)
    use_model(executor, *SCRIPT)
    handle, _ = run(executor, agent)
    sid = handle.session_id
    log = rows(executor, "SELECT step, run, patch FROM helix.state_patches WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %(s)s) ORDER BY step", s=sid)
    assert [r["step"] for r in log] == [1, 2, 3]  # step 4 changed nothing
    assert {r["run"] for r in log} == {1}
    for r in log:
        assert isinstance(r["patch"], list) and r["patch"]
        for op in r["patch"]:
            assert op["op"] in {"add", "remove", "replace", "move", "copy", "test"}
            assert op["path"].startswith("/")
            jsonpatch.JsonPatch([op])  # each op is a valid RFC 6902 operation
    [initial] = rows(executor, "SELECT state FROM helix.state_snapshots WHERE session_num = helix.session_num(%(s)s) AND step = 0", s=sid)
    state = initial["state"]
    for n, r in enumerate(log, start=1):
        state = jsonpatch.apply_patch(state, r["patch"])
        assert state == EXPECTED[n]
    assert state == executor.get_session(sid).state


def test_state_rebuilt_from_periodic_snapshots_matches_the_patch_log(executor, monkeypatch):
    monkeypatch.setattr(loop, "SNAPSHOT_EVERY_STEPS", 2)
    agent = define_agent(unique("state-snap"), tools=[CHANGE], state_schema=Board)
    use_model(executor, *SCRIPT)
    handle, _ = run(executor, agent)
    sid = handle.session_id
    snapshots = rows(executor, "SELECT step, state FROM helix.state_snapshots WHERE session_num = helix.session_num(%(s)s) ORDER BY step", s=sid)
    assert snapshots == [{"step": n, "state": EXPECTED[n]} for n in (0, 2, 4)]
    assert [executor.get_session(sid, at_step=n).state for n in range(5)] == EXPECTED


@pytest.mark.parametrize("at_step", [-1, 5, 99])
def test_get_session_at_a_step_that_does_not_exist_is_a_clear_error(executor, at_step):
    agent = define_agent(unique("state-range"), tools=[CHANGE], state_schema=Board)
    use_model(executor, *SCRIPT)
    handle, _ = run(executor, agent)
    with pytest.raises(HelixError, match="step"):
        executor.get_session(handle.session_id, at_step=at_step)
    assert executor.get_session(handle.session_id, at_step=4).state == EXPECTED[4]
