"""Scale-out: queued runs on several worker processes, a killed worker, `helix-dbos recover`.

Workers are real ``helix-dbos worker`` processes on ``tests/scaleout/scale_app.py``, one
fresh database per test. Runs are enqueued from this process with :class:`RunEnqueuer`
(only the database URL, no DBOS launched here). The agent's ``work`` tool records when
it ran in ``scaleout.intervals``, which proves the global concurrency limit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from helix_dbos._client.queues import QueueSettings, RateLimit, RunEnqueuer
from helix_dbos._database import libpq_url
from helix_dbos.errors import SessionBusyError
from worker_kit import CLI, WORK_SECONDS, Proc, start_worker
from worker_kit import until as poll_until

SESSIONS = 60
GLOBAL_LIMIT = 5
PER_WORKER = 3  # 3 workers x 3 > 5: only the global limit keeps runs at 5


def worker(
    url: str, executor_id: str, command: str = "worker", *extra: str, concurrency: int = PER_WORKER,
    work_seconds: float = WORK_SECONDS, env: dict[str, str] | None = None,
) -> Proc:
    return start_worker(url, *extra, executor_id=executor_id, command=command, concurrency=concurrency,
                        global_limit=GLOBAL_LIMIT, work_seconds=work_seconds, env=env)


def max_overlap(intervals: list[tuple[float, float]]) -> int:
    """The most intervals open at one instant (an end at t comes before a start at t)."""
    points = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals],
                    key=lambda p: (p[0], p[1]))
    active = peak = 0
    for _, delta in points:
        active += delta
        peak = max(peak, active)
    return peak


def test_max_overlap_counts_simultaneous_intervals():
    assert max_overlap([(0, 2), (1, 3), (2, 4)]) == 2
    assert max_overlap([(0, 1), (0, 1), (0.5, 2)]) == 3


def test_queue_settings_and_rate_limit_parse():
    assert RateLimit.parse("50/1") == RateLimit(limit=50, period=1.0)
    assert RateLimit.parse("600/60s") == RateLimit(limit=600, period=60.0)
    with pytest.raises(ValueError):
        RateLimit.parse("fast")
    with pytest.raises(ValueError):
        QueueSettings(worker_concurrency=4, global_concurrency=2)
    assert "global concurrency 5" in QueueSettings(global_concurrency=5).describe()


def test_sixty_sessions_on_three_workers_survive_a_killed_worker(url: str, procs: list[Proc]):
    # Leases long enough that no worker adopts w2's runs before the recovery command takes them.
    slow_start = {"HELIX_LEASE_TTL": "120", "HELIX_LEASE_RENEW": "2"}
    first = worker(url, "w1", env=slow_start)
    procs.append(first)
    first.wait_for("worker w1 listening")  # creates the DBOS tables before the others start
    victim = worker(url, "w2", env=slow_start)
    third = worker(url, "w3", env=slow_start)
    procs += [victim, third]
    victim.wait_for("worker w2 listening")
    third.wait_for("worker w3 listening")

    sessions = [f"scale-{i:02d}" for i in range(SESSIONS)]
    with RunEnqueuer(url) as enqueuer:
        runs = [enqueuer.enqueue("scale-agent", sid, session_id=sid) for sid in sessions]
        with pytest.raises(SessionBusyError):
            enqueuer.enqueue("scale-agent", "again", session_id=sessions[-1])  # still queued: one run at a time

        # Kill w2 midway, while it is inside a tool.
        with psycopg.connect(libpq_url(url), autocommit=True) as conn:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                done = conn.execute("SELECT count(*) FROM helix.sessions WHERE status = 'completed'").fetchone()[0]
                busy = conn.execute(
                    "SELECT count(*) FROM scaleout.intervals WHERE pid = %s AND ended IS NULL", (victim.popen.pid,)
                ).fetchone()[0]
                if done >= SESSIONS // 3 and busy > 0:
                    break
                time.sleep(0.01)
            else:
                pytest.fail("w2 was never caught inside a tool after a third of the sessions")
            victim.popen.kill()
            victim.popen.wait()
            killed_at = time.time()
            orphaned = {
                r[0] for r in conn.execute(
                    "SELECT workflow_uuid FROM dbos.workflow_status WHERE executor_id = 'w2' AND status = 'PENDING'")
            }
        assert orphaned, "the killed worker left no PENDING runs"

        rescuer = worker(url, "rescuer", "recover", "--executor", "w2", env=slow_start)
        procs.append(rescuer)
        line = rescuer.wait_for("recovered ")
        assert line.startswith(f"recovered {len(orphaned)} runs of executor w2"), line
        rescuer.wait_for("  helix:")
        results = [enqueuer.result(run, timeout=60) for run in runs]

    assert [r.status for r in results] == ["completed"] * SESSIONS
    assert {r.session_id for r in results} == set(sessions)
    recovered = {line.strip() for line in rescuer.lines if line.startswith("  helix:")}
    assert recovered == orphaned

    with psycopg.connect(libpq_url(url)) as conn:
        for sid in sessions:
            seqs = [r[0] for r in conn.execute("SELECT seq FROM helix.messages WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %s) ORDER BY seq", (sid,))]
            assert seqs == list(range(5)), (sid, seqs)  # user, assistant, tool, assistant, finish result
            events = [r[0] for r in conn.execute("SELECT type FROM helix.events WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %s) ORDER BY seq", (sid,))]
            assert events.count("finish") == 1 and events.count("run_start") == 1, (sid, events)
        runs_per_session = dict(conn.execute("SELECT s.id, count(*) FROM helix.runs r JOIN helix.sessions s ON s.num = r.session_num GROUP BY s.id").fetchall())
        assert runs_per_session == {sid: 1 for sid in sessions}
        statuses = conn.execute(
            "SELECT status, count(*) FROM dbos.workflow_status WHERE name = 'helix_agent_run' GROUP BY status").fetchall()
        assert statuses == [("SUCCESS", SESSIONS)]
        finished_on = {
            r[0]: r[1] for r in conn.execute(
                "SELECT workflow_uuid, executor_id FROM dbos.workflow_status WHERE workflow_uuid = ANY(%s)",
                (list(orphaned),))
        }
        assert set(finished_on.values()) <= {"w1", "w3", "rescuer"}

        rows = conn.execute("SELECT session_id, pid, started, ended FROM scaleout.intervals").fetchall()
        # a run's slot: from its claim (started_at) to its end, as DBOS stored them (last attempt)
        runs_spans = conn.execute(
            "SELECT started_at_epoch_ms / 1000.0, updated_at / 1000.0 FROM dbos.workflow_status"
            " WHERE name = 'helix_agent_run'").fetchall()

    assert {r[0] for r in rows if r[3] is not None} == set(sessions), "every session did its work"
    cut = [r for r in rows if r[3] is None]
    assert cut and all(r[1] == victim.popen.pid for r in cut), "only the killed worker left work unfinished"
    spans = [(r[2], r[3] if r[3] is not None else killed_at) for r in rows]
    peak = max_overlap(spans)
    assert peak <= GLOBAL_LIMIT, f"{peak} runs worked at once; the limit is {GLOBAL_LIMIT}"
    # The workflow records only show that the limit was reached: DBOS writes updated_at
    # after a finished run has released its slot, so their spans may touch by a few ms.
    run_peak = max_overlap([(float(a), float(b)) for a, b in runs_spans])
    assert max(peak, run_peak) >= GLOBAL_LIMIT, f"the workers never reached the limit ({peak}, {run_peak})"

    for proc in (first, third, rescuer):
        assert proc.stop() == 0, "\n".join(proc.errors[-20:])
        assert proc.lines[-1].endswith("stopped")


def test_a_queued_runs_approval_comes_from_another_process(url: str, procs: list[Proc]):
    procs.append(worker(url, "solo"))
    procs[0].wait_for("worker solo listening")
    with RunEnqueuer(url) as enqueuer:
        run = enqueuer.enqueue("gated-agent", "publish it", session_id="gated-1", priority=3)
        with psycopg.connect(libpq_url(url), autocommit=True) as conn:
            deadline = time.monotonic() + 30
            while conn.execute("SELECT count(*) FROM helix.pending_tool_calls WHERE session_num = (SELECT num FROM helix.sessions WHERE id = 'gated-1')").fetchone()[0] == 0:
                assert time.monotonic() < deadline, "the gated call never became pending"
                time.sleep(0.05)
        env = {**os.environ, "HELIX_DATABASE_URL": url}
        pending = subprocess.run([sys.executable, "-c", CLI, "pending", "--json"], env=env, capture_output=True, text=True)
        assert pending.returncode == 0, pending.stderr
        assert [p["tool_call_id"] for p in json.loads(pending.stdout)] == ["pub"]
        approved = subprocess.run([sys.executable, "-c", CLI, "approve", "gated-1", "pub", "--as", "ops"],
                                  env=env, capture_output=True, text=True)
        assert approved.returncode == 0, approved.stderr
        result = enqueuer.result(run, timeout=30)
    assert result.status == "completed", result
    tail = subprocess.run([sys.executable, "-c", CLI, "tail", "gated-1", "--json"], env=env, capture_output=True, text=True)
    assert tail.returncode == 0, tail.stderr
    types = [json.loads(line)["type"] for line in tail.stdout.splitlines() if line.strip()]
    assert "tool_approval_request" in types and types[-1] == "finish", types
    with psycopg.connect(libpq_url(url)) as conn:
        tool_result = conn.execute(
            "SELECT message FROM helix.messages WHERE session_num = (SELECT num FROM helix.sessions WHERE id = 'gated-1') AND message->>'role' = 'tool' ORDER BY seq LIMIT 1"
        ).fetchone()[0]
        priority, executor_id = conn.execute(
            "SELECT priority, executor_id FROM dbos.workflow_status WHERE workflow_uuid = %s", (run.workflow_id,)
        ).fetchone()
    assert "published" in json.dumps(tool_result)
    assert (priority, executor_id) == (3, "solo")


def test_execute_with_a_queue_enqueues_and_the_rate_limit_holds(executor):
    """In-process: ``execute(queue=...)`` enqueues (this process works the queue too)."""
    import uuid

    from dbos import DBOS

    from helix_dbos import MockLLMAdapter, define_agent
    from helix_dbos._client.queues import register_queue
    from helix_dbos.types import TextStepResult

    name = f"inproc-{uuid.uuid4().hex[:8]}"
    agent = define_agent(name=name, system_prompt="Answer.")
    executor.llm = MockLLMAdapter(responder=lambda messages, tools: TextStepResult(content="ok"))
    register_queue(QueueSettings(name=name, rate_limit=RateLimit(limit=2, period=1.0), polling_interval_sec=0.02))
    try:
        handles = [executor.execute(agent, "hi", session_id=f"{name}-{i}", queue=name, priority=i + 1) for i in range(4)]
        with pytest.raises(SessionBusyError):  # the last to run: under the rate limit it waits a second in the queue
            executor.execute(agent, "again", session_id=f"{name}-3", queue=name)
        assert [h.result(timeout=20).status for h in handles] == ["completed"] * 4
        rows = [DBOS.get_workflow_status(h.workflow_id) for h in handles]
        assert [(s.queue_name, s.priority) for s in rows] == [(name, i + 1) for i in range(4)]
        with psycopg.connect(libpq_url(executor.database_url)) as conn:
            started = sorted(r[0] / 1000 for r in conn.execute(
                "SELECT started_at_epoch_ms FROM dbos.workflow_status WHERE queue_name = %s", (name,)))
        assert started[2] - started[0] >= 0.95, f"3 runs started within a second under a 2/1s limit: {started}"
    finally:
        DBOS.delete_queue(name)


# --- human-in-the-loop at scale: a waiting run holds no slot ------------------------------------


def cli_run(url: str, *args: str) -> str:
    """``helix-dbos ARGS`` in another process that has nothing but the database URL."""
    done = subprocess.run([sys.executable, "-c", CLI, *args], env={**os.environ, "HELIX_DATABASE_URL": url},
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def until(query: str, args: tuple, want: Callable[[Any], bool], url: str, what: str, timeout: float = 30) -> Any:
    return poll_until(url, query, args, want, what, timeout)


def parked(url: str, sessions: list[str]) -> None:
    """Wait until each session's run has parked: its step's waiter holds it."""
    until("SELECT count(*) FROM helix.runs r JOIN helix.sessions s ON s.num = r.session_num"
          " JOIN dbos.workflow_status w ON w.workflow_uuid = r.workflow_id"
          " WHERE s.id = ANY(%s) AND w.name = 'helix_await_answers' AND w.status = 'PENDING'",
          (sessions,), lambda n: n == len(sessions), url, "parked runs")


def completed_once(url: str, sessions: list[str]) -> None:
    """Each session completed with one run, one tool result for its gated call and one finish."""
    with psycopg.connect(libpq_url(url)) as conn:
        for sid in sessions:
            roles = [r[0] for r in conn.execute(
                "SELECT message->>'role' FROM helix.messages WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %s) ORDER BY seq", (sid,))]
            assert roles == ["user", "assistant", "tool", "assistant", "tool"], (sid, roles)
            types = [r[0] for r in conn.execute("SELECT type FROM helix.events WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %s)", (sid,))]
            assert (types.count("run_start"), types.count("finish"), types.count("tool_result")) == (1, 1, 1), types
            runs = conn.execute("SELECT status FROM helix.runs WHERE session_num = helix.session_num(%s)", (sid,)).fetchall()
            assert runs == [("completed",)], (sid, runs)


def test_runs_waiting_for_approval_hold_no_slot(url: str, procs: list[Proc]):
    """Concurrency 2, five runs waiting for a person: a sixth session still runs to its end;
    then the five are approved from another process and each finishes, once, on the queue."""
    procs.append(worker(url, "w1", concurrency=2))
    procs[0].wait_for("worker w1 listening")
    waiting = [f"wait-{i}" for i in range(5)]
    with RunEnqueuer(url) as enqueuer:
        runs = [enqueuer.enqueue("gated-agent", "publish it", session_id=sid) for sid in waiting]
        parked(url, waiting)
        assert enqueuer.status(runs[0]) == "PENDING"  # the waiter's status: the run is not over
        sixth = enqueuer.result(enqueuer.enqueue("scale-agent", "sixth", session_id="sixth"), timeout=30)
        assert sixth.status == "completed"
        assert {enqueuer.status(run) for run in runs} == {"PENDING"}
        for sid in waiting:
            cli_run(url, "approve", sid, "pub", "--as", "ops")
        results = [enqueuer.result(run, timeout=30) for run in runs]
    assert [r.status for r in results] == ["completed"] * 5
    completed_once(url, waiting)
    with psycopg.connect(libpq_url(url)) as conn:
        placed = conn.execute(
            "SELECT name, queue_name, status, count(*) FROM dbos.workflow_status WHERE workflow_uuid LIKE 'helix:wait-%%'"
            " GROUP BY 1, 2, 3 ORDER BY 1, 2 NULLS LAST").fetchall()
    assert placed == [  # the runs and their continuations on the queue, the waiters off it
        ("helix_agent_run", "agents", "SUCCESS", 10), ("helix_await_answers", None, "SUCCESS", 5),
    ]


def test_the_answer_reaches_the_run_on_another_worker(url: str, procs: list[Proc]):
    """w1 (one slot) parks a run, then takes a long one; the approval's continuation goes
    to w2, the worker with a free slot."""
    first = worker(url, "w1", concurrency=1, work_seconds=60)  # busy until the answer is in, however slow the machine
    procs.append(first)
    first.wait_for("worker w1 listening")
    with RunEnqueuer(url) as enqueuer:
        run = enqueuer.enqueue("gated-agent", "publish it", session_id="gated-1")
        parked(url, ["gated-1"])
        enqueuer.enqueue("scale-agent", "busy", session_id="busy-1")
        until("SELECT count(*) FROM scaleout.intervals WHERE session_id = 'busy' AND pid = %s", (first.popen.pid,),
              lambda n: n == 1, url, "w1 busy in a tool")
        second = worker(url, "w2", concurrency=1)
        procs.append(second)
        second.wait_for("worker w2 listening")
        cli_run(url, "approve", "gated-1", "pub")
        assert enqueuer.result(run, timeout=30).status == "completed"
    completed_once(url, ["gated-1"])
    with psycopg.connect(libpq_url(url)) as conn:
        ran_on = dict(conn.execute(
            "SELECT workflow_uuid, executor_id FROM dbos.workflow_status WHERE workflow_uuid LIKE 'helix:gated-1:%'"))
    assert ran_on == {
        "helix:gated-1:run:1": "w1", "helix:gated-1:run:1:wait:1": "w1", "helix:gated-1:run:1:step:1": "w2",
    }


def test_answers_sent_while_no_worker_runs_complete_once_after_a_restart(url: str, procs: list[Proc]):
    """SIGKILL of the only worker while three runs wait; they are approved while no worker
    runs; the restarted worker recovers the waiters and each run completes once."""
    victim = worker(url, "w1")
    victim.wait_for("worker w1 listening")
    waiting = [f"killed-{i}" for i in range(3)]
    with RunEnqueuer(url) as enqueuer:
        runs = [enqueuer.enqueue("gated-agent", "publish it", session_id=sid) for sid in waiting]
        parked(url, waiting)
        victim.popen.kill()
        victim.popen.wait()
        for sid in waiting:
            cli_run(url, "approve", sid, "pub")
        procs.append(worker(url, "w1"))
        results = [enqueuer.result(run, timeout=30) for run in runs]
    assert [r.status for r in results] == ["completed"] * 3
    completed_once(url, waiting)


def test_a_deadline_fires_while_the_run_holds_no_slot(url: str, procs: list[Proc]):
    """A parked run's approval times out while the worker's only slot runs another session:
    the waiter, which holds no slot, times the call out and the run ends on the timeout path."""
    procs.append(worker(url, "w1", concurrency=1, work_seconds=4))
    procs[0].wait_for("worker w1 listening")
    with RunEnqueuer(url) as enqueuer:
        run = enqueuer.enqueue("deadline-agent", "publish it", session_id="soon-1")
        parked(url, ["soon-1"])
        busy = enqueuer.enqueue("scale-agent", "busy", session_id="busy-1")
        until("SELECT status FROM helix.pending_tool_calls WHERE session_num = (SELECT num FROM helix.sessions WHERE id = 'soon-1')", (),
              lambda status: status == "timed_out", url, "the call timed out")
        with psycopg.connect(libpq_url(url)) as conn:
            working = conn.execute("SELECT count(*) FROM scaleout.intervals WHERE session_id = 'busy'"
                                   " AND ended IS NULL").fetchone()[0]
        assert working == 1, "the deadline fired while the only slot ran another session"
        assert enqueuer.result(run, timeout=30).status == "completed"
        assert enqueuer.result(busy, timeout=30).status == "completed"
    with psycopg.connect(libpq_url(url)) as conn:
        tool = conn.execute("SELECT message FROM helix.messages WHERE session_num = (SELECT num FROM helix.sessions WHERE id = 'soon-1')"
                            " AND message->>'role' = 'tool' ORDER BY seq LIMIT 1").fetchone()[0]
    assert "timed out" in json.dumps(tool).lower(), tool
