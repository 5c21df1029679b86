"""MCP servers as toolsets, against a real MCP server process (``tests/mcp_server.py``)
over streamable HTTP and stdio, real DBOS and Postgres, the model scripted: the tools a
run lists and calls, what is recorded, errors the model sees, reconnects, credentials."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from helix_dbos import AgentDefinitionError, define_agent, define_tool
from helix_dbos._database import libpq_url
from helix_dbos.answers import ApprovalResponse
from helix_dbos.mcp import Backoff, MCPToolset
from mcp_kit import MCPTestServer, mcp_server, stdio_options  # noqa: F401  (mcp_server: a fixture)
from runtime_testkit import (
    RESULT_TIMEOUT,
    NoInput,
    assert_paired,
    call,
    calls,
    result_for,
    rows,
    text,
    unique,
    use_model,
    wait_for,
)


def offered(mock: Any) -> list[list[str]]:
    """The tool names offered to the model, per model call."""
    return [[spec.name for spec in each.tools] for each in mock.inputs]


def answer(messages: list[Any], call_id: str) -> Any:
    """The JSON result of call ``call_id`` (its error text when it failed)."""
    found = result_for(messages, call_id)
    return found.content if found.is_error else json.loads(found.content)


def steps_named(executor: Any, session_id: str, prefix: str) -> list[dict[str, Any]]:
    return rows(
        executor,
        "SELECT function_name, output FROM dbos.operation_outputs WHERE workflow_uuid LIKE %(wf)s"
        " AND function_name LIKE %(name)s ORDER BY function_id",
        wf=f"helix:{session_id}:run:%", name=f"{prefix}%",
    )


# --- definitions --------------------------------------------------------------------------


def test_a_toolset_needs_one_place_and_a_valid_name() -> None:
    with pytest.raises(AgentDefinitionError, match="either url"):
        MCPToolset("x")
    with pytest.raises(AgentDefinitionError, match="either url"):
        MCPToolset("x", url="http://a/mcp", command="srv")
    with pytest.raises(AgentDefinitionError, match="name must be"):
        MCPToolset("no spaces", url="http://a/mcp")
    with pytest.raises(AgentDefinitionError, match="headers need a url"):
        MCPToolset("x", command="srv", headers={"A": "b"})
    with pytest.raises(AgentDefinitionError, match="timeout"):
        MCPToolset("x", url="http://a/mcp", timeout=0)


def test_an_agent_takes_toolsets_with_distinct_names() -> None:
    one = MCPToolset("one", url="http://a/mcp")
    with pytest.raises(AgentDefinitionError, match="duplicate toolset name 'one'"):
        define_agent(unique("dup"), toolsets=[one, MCPToolset("one", url="http://b/mcp")])
    with pytest.raises(AgentDefinitionError, match="is not a toolset"):
        define_agent(unique("bad"), toolsets=["http://a/mcp"])  # type: ignore[list-item]


# --- runs ---------------------------------------------------------------------------------


def test_a_run_lists_the_servers_tools_once_and_calls_them_as_steps(executor: Any, mcp_server: MCPTestServer) -> None:
    toolset = MCPToolset("calc", url=mcp_server.url, prefix="calc", deny=["slow"])
    own = define_tool("local", "A helix tool.", NoInput, lambda i, c: {"local": True})
    agent = define_agent(unique("mcp-e2e"), tools=[own], toolsets=[toolset])
    executor.register(agent)
    mock = use_model(
        executor,
        calls(call("c1", "calc_add", {"a": 2, "b": 3}), call("c2", "calc_picture"), call("c3", "local")),
        calls(call("c4", "calc_open_counter")),
        lambda messages: calls(call("c5", "calc_increment", {"handle": _handle(messages)})),
        lambda messages: calls(call("c6", "calc_increment", {"handle": _handle(messages)})),
        text("done"),
    )
    handle = executor.execute(agent, "go")
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    names = offered(mock)
    assert names[0][0] == "local" and set(names[0][1:]) == {
        "calc_add", "calc_whoami", "calc_fail", "calc_picture", "calc_open_counter", "calc_increment",
    }
    assert all(each == names[0] for each in names)  # the same tools at every step
    add_spec = next(spec for spec in mock.inputs[0].tools if spec.name == "calc_add")
    assert add_spec.parameters["properties"]["a"]["type"] == "integer"  # the server's JSON Schema
    assert add_spec.description == "Add two integers."

    messages = executor.get_session(handle.session_id).messages
    assert_paired(messages)
    assert answer(messages, "c1") == {"content": [{"type": "text", "text": "5"}], "structured": {"result": 5}}
    assert answer(messages, "c2")["content"] == [
        {"type": "text", "text": "a red dot"},
        {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"},
        {"type": "resource_link", "name": "red.png", "uri": "file:///dots/red.png"},
    ]
    assert answer(messages, "c6")["structured"] == {"result": 2}  # state kept across calls by handle
    listed = steps_named(executor, handle.session_id, "tools:")
    assert [s["function_name"] for s in listed] == ["tools:calc"]
    assert sorted(c["tool"] for c in mcp_server.calls()) == ["add", "increment", "increment", "open_counter", "picture"]
    assert len(steps_named(executor, handle.session_id, "tool:calc_")) == 5


def _handle(messages: list[Any]) -> str:
    for message in reversed(messages):
        if getattr(message, "tool_name", None) == "calc_open_counter":
            return str(json.loads(message.content)["structured"]["handle"])
    raise AssertionError("no counter handle in the transcript")


def test_errors_reach_the_model_as_tool_errors(executor: Any, mcp_server: MCPTestServer) -> None:
    agent = define_agent(unique("mcp-errors"), toolsets=[MCPToolset("calc", url=mcp_server.url)])
    executor.register(agent)
    use_model(
        executor,
        calls(call("bad", "add", {"a": "two"}), call("err", "fail", {"why": "no reason"})),
        text("done"),
    )
    handle = executor.execute(agent, "go")
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    messages = executor.get_session(handle.session_id).messages
    bad, err = result_for(messages, "bad"), result_for(messages, "err")
    assert bad.is_error and "Invalid arguments for tool 'add'" in bad.content
    assert "a: 'two' is not of type 'integer'" in bad.content and "'b' is a required property" in bad.content
    assert err.is_error and "cannot do it: no reason" in err.content
    assert [c["tool"] for c in mcp_server.calls()] == ["fail"]  # invalid arguments never reach the server


def test_a_server_restarted_mid_run_is_reconnected(executor: Any, mcp_server: MCPTestServer) -> None:
    agent = define_agent(unique("mcp-restart"), toolsets=[MCPToolset("calc", url=mcp_server.url)])
    executor.register(agent)

    def restart_then_call(messages: list[Any]) -> dict[str, Any]:
        mcp_server.kill()
        mcp_server.restart()
        return calls(call("c2", "add", {"a": 2, "b": 2}))

    use_model(executor, calls(call("c1", "add", {"a": 1, "b": 1})), restart_then_call, text("done"))
    handle = executor.execute(agent, "go")
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    messages = executor.get_session(handle.session_id).messages
    assert answer(messages, "c2")["structured"] == {"result": 4}
    pids = [c["pid"] for c in mcp_server.calls("add")]
    assert len(pids) == 2 and pids[0] != pids[1]


def test_a_call_in_flight_when_the_server_restarts_is_sent_again(executor: Any, mcp_server: MCPTestServer) -> None:
    # patient: a new server process can take seconds to start on a busy machine
    patient = Backoff(attempts=8, first=0.2, most=5.0)
    agent = define_agent(unique("mcp-in-flight"), toolsets=[MCPToolset("calc", url=mcp_server.url, backoff=patient)])
    executor.register(agent)
    use_model(executor, calls(call("c1", "slow", {"label": "k", "seconds": 1.5})), text("done"))

    def restart_during_the_call() -> None:
        wait_for(lambda: mcp_server.calls("begin"), timeout=RESULT_TIMEOUT, what="the call reaching the server")
        mcp_server.kill()
        mcp_server.restart()

    restarter = threading.Thread(target=restart_during_the_call)
    restarter.start()
    handle = executor.execute(agent, "go")
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    restarter.join()
    assert answer(executor.get_session(handle.session_id).messages, "c1")["structured"] == {"result": "k"}
    begun = mcp_server.calls("begin")
    assert len(begun) == 2 and begun[0]["pid"] != begun[1]["pid"]  # sent again to the new server: at-least-once
    assert len(mcp_server.calls("slow")) == 1


def test_a_server_that_stays_down_is_an_error_the_model_sees(executor: Any, mcp_server: MCPTestServer) -> None:
    toolset = MCPToolset("calc", url=mcp_server.url, backoff=Backoff(attempts=3, first=0.05))
    agent = define_agent(unique("mcp-down"), toolsets=[toolset])
    executor.register(agent)

    def kill_then_call(messages: list[Any]) -> dict[str, Any]:
        mcp_server.kill()
        return calls(call("c1", "add", {"a": 1, "b": 1}))

    use_model(executor, kill_then_call, text("done"))
    handle = executor.execute(agent, "go")
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    result = result_for(executor.get_session(handle.session_id).messages, "c1")
    assert result.is_error and "MCP server 'calc' could not be reached after 3 attempts" in result.content


def test_a_slow_server_hits_the_tool_timeout(executor: Any, mcp_server: MCPTestServer) -> None:
    agent = define_agent(unique("mcp-slow"), toolsets=[MCPToolset("calc", url=mcp_server.url, timeout=0.5)])
    executor.register(agent)
    use_model(executor, calls(call("c1", "slow", {"label": "x", "seconds": 30})), text("done"))
    handle = executor.execute(agent, "go")
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    result = result_for(executor.get_session(handle.session_id).messages, "c1")
    assert result.is_error and "timed out after 0.5s" in result.content


def test_allow_lists_and_approvals_apply_to_server_tools(executor: Any, mcp_server: MCPTestServer) -> None:
    toolset = MCPToolset("calc", url=mcp_server.url, allow=["add", "whoami"], require_approval={"add": True})
    agent = define_agent(unique("mcp-approve"), toolsets=[toolset])
    executor.register(agent)
    mock = use_model(executor, calls(call("c1", "add", {"a": 1, "b": 2})), text("done"))
    handle = executor.execute(agent, "go")
    pending = _wait_pending(executor, handle.session_id)
    assert [p.tool_name for p in pending] == ["add"]
    assert mcp_server.calls() == []
    executor.submit_tool_result(handle.session_id, ApprovalResponse(tool_call_id="c1", approved=True))
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    assert sorted(offered(mock)[0]) == ["add", "whoami"]
    assert answer(executor.get_session(handle.session_id).messages, "c1")["structured"] == {"result": 3}
    assert [s["function_name"] for s in steps_named(executor, handle.session_id, "tools:")] == ["tools:calc"]  # not listed again


def test_operators_see_each_mcp_call_named_with_its_server(executor: Any, mcp_server: MCPTestServer) -> None:
    """``helix-dbos show`` and the console's session page and inbox name a call of an MCP
    tool with its server (the run's listing step records which server each tool is of)."""
    from click.testing import CliRunner

    from helix_dbos import admin
    from helix_dbos._cli import main
    from helix_dbos.server import create_app
    from runtime_testkit import Serving

    own = define_tool("local", "A helix tool.", NoInput, lambda i, c: {"local": True})
    toolset = MCPToolset("calc", url=mcp_server.url, prefix="m", allow=["add"], require_approval={"add": True})
    agent = define_agent(unique("mcp-named"), tools=[own], toolsets=[toolset])
    executor.register(agent)
    use_model(executor, calls(call("c1", "m_add", {"a": 1, "b": 2}), call("c2", "local")), text("done"))
    handle = executor.execute(agent, "go")
    sid = handle.session_id
    _wait_pending(executor, sid)
    serving = Serving(create_app(executor, allow_unauthenticated=True))
    try:
        inbox = httpx.get(f"{serving.url}/console/", timeout=RESULT_TIMEOUT).text
        card = inbox[inbox.index(f'id="call-{sid}-c1"'):]
        assert '<span class="tool">m_add</span> <span class="muted server">MCP server calc</span>' in card
        executor.submit_tool_result(sid, ApprovalResponse(tool_call_id="c1", approved=True))
        assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
        page = httpx.get(f"{serving.url}/console/sessions/{sid}", timeout=RESULT_TIMEOUT).text
    finally:
        serving.stop()
    assert admin.show_session(executor.database_url, sid).tool_servers == {"m_add": "calc"}
    assert '<td class="tool">m_add <span class="muted server">MCP server calc</span></td>' in page
    assert "[c1] · MCP server calc</pre>" in page and "[c2]</pre>" in page  # its own tool has no server
    shown = CliRunner().invoke(main, ["show", sid], env={"HELIX_DATABASE_URL": executor.database_url})
    assert shown.exit_code == 0, shown.output
    assert "call m_add (MCP server calc) [c1]" in shown.output and "result m_add (MCP server calc) [c1]:" in shown.output
    assert "call local [c2]" in shown.output and "result local [c2]:" in shown.output


def _wait_pending(executor: Any, session_id: str) -> list[Any]:
    from runtime_testkit import wait_for

    return wait_for(lambda: executor.list_pending(session_id), timeout=RESULT_TIMEOUT, what="a pending call")  # type: ignore[no-any-return]


def test_a_stdio_server_works_the_same(executor: Any, tmp_path: Path) -> None:
    agent = define_agent(unique("mcp-stdio"), toolsets=[MCPToolset("local", **stdio_options(tmp_path))])
    executor.register(agent)
    use_model(
        executor, calls(call("c1", "add", {"a": 20, "b": 22})), calls(call("c2", "whoami")), text("done"),
    )
    handle = executor.execute(agent, "go")
    assert handle.result(timeout=RESULT_TIMEOUT).status == "completed"
    messages = executor.get_session(handle.session_id).messages
    assert answer(messages, "c1")["structured"] == {"result": 42}
    pids = {json.loads(line)["pid"] for line in (tmp_path / "mcp_calls.jsonl").read_text().splitlines()}
    assert len(pids) == 1  # one server process for the run


# --- credentials, traces, metrics ----------------------------------------------------------

PROGRAM = Path(__file__).with_name("mcp_users_program.py")
SECRETS = ["tok-alice-7d1f3c", "tok-bob-92ab44"]  # mcp_users_program.SECRETS


def test_each_users_run_calls_the_server_as_that_user_and_no_secret_is_stored_or_traced(
    migrated_url: str, mcp_server: MCPTestServer
) -> None:
    done = subprocess.run(
        [sys.executable, str(PROGRAM), migrated_url, mcp_server.url], capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["results"] == {"alice": "completed", "bob": "completed"}
    seen = [(c["tool"], c["authorization"]) for c in mcp_server.calls()]
    assert seen == [
        ("whoami", "Bearer tok-alice-7d1f3c"), ("fail", "Bearer tok-alice-7d1f3c"),
        ("whoami", "Bearer tok-bob-92ab44"), ("fail", "Bearer tok-bob-92ab44"),
    ]
    tool_spans = [s for s in report["spans"] if s["name"] in ("execute_tool whoami", "execute_tool fail")]
    assert len(tool_spans) == 4 and all(s["attributes"]["helix.mcp.server"] == "calc" for s in tool_spans)
    assert any("gen_ai.tool.call.result" in s["attributes"] for s in tool_spans)  # content is captured ...
    assert not [s for s in report["spans"] if any(secret in json.dumps(s) for secret in SECRETS)]  # ... but no secret
    assert report["mcp_calls"] == {"ok": 2.0, "error": 2.0}
    assert _rows_holding(migrated_url, SECRETS) == []


def _rows_holding(url: str, secrets: list[str]) -> list[str]:
    """The rows of every helix.* table and of DBOS's workflow_status and
    operation_outputs that hold one of ``secrets`` (as text)."""
    found = []
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        tables = [
            f"{schema}.{name}" for schema, name in conn.execute(
                "SELECT table_schema, table_name FROM information_schema.tables WHERE table_schema = 'helix'"
                " AND table_type = 'BASE TABLE'"
            )
        ] + ["dbos.workflow_status", "dbos.operation_outputs"]
        assert "helix.messages" in tables and "helix.events" in tables
        for table in tables:
            for (row,) in conn.execute(f"SELECT t::text FROM {table} t"):
                if any(secret in row for secret in secrets):
                    found.append(f"{table}: {row[:300]}")
    return found
