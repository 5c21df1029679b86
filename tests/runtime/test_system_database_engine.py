"""helix's DBOS config does not ping DBOS's pooled connections before each use
(``helix_dbos._client.launcher.SYSTEM_DATABASE_ENGINE``): DBOS runs a system-database
operation again when its connection turns out dead. So a run whose process loses every
connection to the database in the middle of a step still completes, each of its steps
committed once. tests/faults/ kill connections every 50 ms and restart the server."""

from __future__ import annotations

from typing import Any

from backends import database_clock, terminate_other_backends, wait_for_dbos_listener
from runtime_testkit import RESULT_TIMEOUT, Gate, call, calls, rows, text, unique, use_model

from helix_dbos import define_agent
from helix_dbos._client.launcher import dbos_config


def test_the_config_turns_the_ping_off_and_takes_the_apps_engine_settings_over_it() -> None:
    url = "postgresql://postgres@127.0.0.1:5432/app"

    assert dbos_config(url)["db_engine_kwargs"] == {"pool_pre_ping": False}
    assert dbos_config(url, db_engine_kwargs={"pool_size": 40})["db_engine_kwargs"] == {
        "pool_pre_ping": False,
        "pool_size": 40,
    }
    assert dbos_config(url, db_engine_kwargs={"pool_pre_ping": True})["db_engine_kwargs"] == {"pool_pre_ping": True}


def test_a_run_whose_connections_all_die_mid_step_completes_with_each_step_once(
    executor: Any, database_url: str
) -> None:
    gate = Gate()
    agent = define_agent(unique("connections-die"), tools=[gate.tool()])
    use_model(executor, calls(call("g1", "wait_here")), text("end"))
    handle = executor.execute(agent, "go")
    gate.wait_entered()

    since = database_clock(database_url)
    killed = terminate_other_backends(database_url)  # DBOS's pooled connections among them
    gate.open()
    result = handle.result(timeout=RESULT_TIMEOUT)
    wait_for_dbos_listener(database_url, since)  # for the next test's messages

    assert killed > 0
    assert (result.status, result.output, result.step_count) == ("completed", "end", 2)
    assert gate.calls == 1
    stored = rows(executor, "SELECT message->>'role' AS role FROM helix.messages WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %(s)s) ORDER BY seq", s=handle.session_id)
    assert [r["role"] for r in stored] == ["user", "assistant", "tool", "assistant"]
