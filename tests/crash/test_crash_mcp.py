"""Crash test for MCP toolsets: SIGKILL a worker while a call to a real MCP server is in
flight; a relaunched worker recovers the run. The recovered run offers the model the tool
list the run recorded (though the server, restarted meanwhile, now lists one more tool),
never calls a checkpointed call again, and records the call that was in flight once
(it reached the server twice: at-least-once)."""

from __future__ import annotations

import json
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from helix_dbos._database import libpq_url

from crash_kit import finish, migrated_database, start_worker  # type: ignore[import-not-found]

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from mcp_kit import MCPTestServer  # noqa: E402

WORKER = Path(__file__).with_name("mcp_worker.py")
SESSION = "mcp-crash-session"


def test_a_run_killed_during_an_mcp_call_recovers_with_the_same_tools_and_no_repeated_call(
    make_database: Callable[[], str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = migrated_database(make_database, "SELECT 1")
    server = MCPTestServer.start(tmp_path)
    try:
        monkeypatch.setenv("HELIX_MCP_URL", server.url)
        marks = tmp_path / "marks"
        marks.mkdir()
        first = start_worker(WORKER, url, SESSION, "exec-1", "start", marks)
        deadline = time.monotonic() + 60
        while not server.calls("begin"):  # the slow call reached the server: kill its worker now
            assert first.poll() is None, first.communicate()
            assert time.monotonic() < deadline, "the slow call never began"
            time.sleep(0.05)
        first.send_signal(signal.SIGKILL)
        first.communicate()
        server.kill()
        server.restart(extra_tool=True)  # the server now lists one more tool

        result = finish(start_worker(WORKER, url, SESSION, "exec-1", "recover", marks))
        assert result["status"] == "completed"
    finally:
        server.stop()

    offered = [json.loads(line) for line in (marks / "offered.jsonl").read_text().splitlines()]
    assert len(offered) == 3 and all(names == offered[0] for names in offered)
    assert "extra" not in offered[0] and {"add", "slow"} <= set(offered[0])
    assert len(server.calls("add")) == 1                      # checkpointed before the kill: not called again
    assert [c["args"]["label"] for c in server.calls("begin")] == ["k", "k"]  # in flight at the kill: called again
    assert len(server.calls("slow")) == 1                     # and it finished once, on the restarted server
    with psycopg.connect(libpq_url(url)) as conn:
        results = conn.execute(
            "SELECT count(*) FROM helix.messages WHERE message->>'tool_call_id' = 'c2'"
        ).fetchone()
        listings = conn.execute("SELECT count(*) FROM dbos.operation_outputs WHERE function_name = 'tools:calc'").fetchone()
    assert results == (1,) and listings == (1,)               # one result recorded; the tools listed once
