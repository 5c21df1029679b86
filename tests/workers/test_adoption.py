"""Runs survive their worker: a worker stopped, killed, restarted or frozen strands nothing.

Two real ``helix-dbos worker`` processes with generated executor ids (as a Kubernetes
Deployment or a systemd unit runs them) share 12 runs whose one tool takes 4 s; worker A
is then stopped one way or another while all 12 are inside their tool. Every run must
complete within 45 s of the stop, with exactly one commit per step, and the only tool
calls that ran twice are the ones A was in the middle of when it died.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psycopg
import pytest

from helix_dbos._client.queues import RunEnqueuer
from helix_dbos._database import libpq_url
from worker_kit import CLI, Proc, start_worker, until

RUNS = 12
TOOL_SECONDS = 4.0
FINISH_WITHIN = 45.0
LONG_LEASE = {"HELIX_LEASE_TTL": "120", "HELIX_LEASE_RENEW": "2"}
"""Leases that outlast FINISH_WITHIN: runs that complete in time were handed back, not left to expire."""


def two_busy_workers(url: str, procs: list[Proc], enqueuer: RunEnqueuer, *extra_a: str,
                     env: dict[str, str] | None = None) -> tuple[Proc, Proc, list]:
    """Workers A and B (6 runs each at most) and 12 runs, all inside their tool."""
    a = start_worker(url, *extra_a, concurrency=RUNS // 2, work_seconds=TOOL_SECONDS, env=env)
    procs.append(a)
    a.listening()
    b = start_worker(url, concurrency=RUNS // 2, work_seconds=TOOL_SECONDS, env=env)
    procs.append(b)
    b.listening()
    runs = [enqueuer.enqueue("scale-agent", f"s-{i:02d}", session_id=f"s-{i:02d}") for i in range(RUNS)]
    until(url, "SELECT count(*) FROM scaleout.intervals WHERE ended IS NULL AND pid = %s", (a.pid,),
          lambda n: n == RUNS // 2, "runs inside A's tool")
    return a, b, runs


def all_complete(enqueuer: RunEnqueuer, runs: list, stopped_at: float) -> float:
    """Wait for every run; the seconds from the stop to the last one's end."""
    deadline = stopped_at + FINISH_WITHIN
    for run in runs:
        result = enqueuer.result(run, timeout=max(0.1, deadline - time.monotonic()))
        assert result.status == "completed", result
    return time.monotonic() - stopped_at


def once_per_step(url: str, sessions: list[str]) -> None:
    """Each session: one run, one commit per step (two steps), a valid transcript."""
    with psycopg.connect(libpq_url(url)) as conn:
        for sid in sessions:
            roles = [r[0] for r in conn.execute(
                "SELECT message->>'role' FROM helix.messages WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %s) ORDER BY seq", (sid,))]
            assert roles == ["user", "assistant", "tool", "assistant", "tool"], (sid, roles)
            types = [r[0] for r in conn.execute("SELECT type FROM helix.events WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %s)", (sid,))]
            counts = {t: types.count(t) for t in ("run_start", "step_finish", "finish", "tool_result")}
            assert counts == {"run_start": 1, "step_finish": 2, "finish": 1, "tool_result": 1}, (sid, counts)
            steps = conn.execute("SELECT step_count, status FROM helix.sessions WHERE id = %s", (sid,)).fetchone()
            assert steps == (2, "completed"), (sid, steps)


def tool_runs(url: str) -> dict[str, list[tuple[int, bool]]]:
    """Each session's tool executions: (pid, whether it ended)."""
    with psycopg.connect(libpq_url(url)) as conn:
        rows = conn.execute("SELECT session_id, pid, ended IS NOT NULL FROM scaleout.intervals ORDER BY id").fetchall()
    runs: dict[str, list[tuple[int, bool]]] = {}
    for sid, pid, ended in rows:
        runs.setdefault(sid, []).append((pid, ended))
    return runs


def repeated_only_where_cut(url: str, cut_pid: int | None) -> int:
    """Every session's tool ended exactly once; an extra run is one ``cut_pid`` never
    finished. The number of sessions whose tool ran twice."""
    twice = 0
    for sid, executions in tool_runs(url).items():
        assert sum(ended for _, ended in executions) == 1, (sid, executions)
        cut = [pid for pid, ended in executions if not ended]
        assert all(pid == cut_pid for pid in cut), (sid, executions)
        twice += bool(cut)
    return twice


def cli(url: str, *args: str) -> str:
    done = subprocess.run([sys.executable, "-c", CLI, *args], capture_output=True, text=True,
                          env={**os.environ, "HELIX_DATABASE_URL": url}, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def workers_json(url: str) -> list[dict]:
    return json.loads(cli(url, "workers", "--json"))


def says_adopted(url: str, sid: str, dead: str, adopter: str) -> None:
    """``helix-dbos show`` and ``tail`` of ``sid`` say its run 1 was adopted by
    ``adopter`` after worker ``dead`` died, and ``show --json`` records it."""
    words = f"adopted by {adopter} at "
    shown = [line.strip() for line in cli(url, "show", sid).splitlines() if "adopted by" in line]
    assert len(shown) == 1 and shown[0].startswith(f"run 1 {words}") and shown[0].endswith(
        f"after worker {dead} died"), shown
    tailed = [line.split() for line in cli(url, "tail", sid, "--no-follow").splitlines() if "adopted by" in line]
    assert [line[:4] for line in tailed] == [["run", "1", "adopted", "adopted"]] and tailed[0][-1] == "died", tailed
    [run] = json.loads(cli(url, "show", sid, "--json"))["runs"]
    assert [(a["from_executor"], a["from_status"], a["adopted_by"]) for a in run["adoptions"]] == [
        (dead, "dead", adopter)], run


def test_a_drained_worker_finishes_its_runs_and_strands_nothing(url: str, procs: list[Proc]):
    """SIGTERM (a rolling deploy): A takes no new run, finishes its six in the grace
    period, hands back nothing and exits 0."""
    with RunEnqueuer(url) as enqueuer:
        a, b, runs = two_busy_workers(url, procs, enqueuer)
        a_id = a.listening()
        stopped_at = time.monotonic()
        assert a.stop() == 0, "\n".join(a.errors[-20:])
        took = all_complete(enqueuer, runs, stopped_at)
    print(f"drain: all {RUNS} runs completed {took:.1f}s after SIGTERM")
    assert any(line.startswith(f"worker {a_id} finished {RUNS // 2} runs and handed back 0") for line in a.lines), a.lines
    assert a.lines[-1] == f"worker {a_id} stopped"
    once_per_step(url, [f"s-{i:02d}" for i in range(RUNS)])
    assert repeated_only_where_cut(url, None) == 0
    states = {w["executor_id"]: w["status"] for w in workers_json(url)}
    assert states[a_id] in ("released", "adopted") and states[b.listening()] == "live", states


def test_a_drain_past_its_grace_hands_the_rest_back_at_once(url: str, procs: list[Proc]):
    """SIGTERM with a grace shorter than the tool: A hands its six runs back as it stops,
    and B resumes them without waiting for A's lease to expire."""
    with RunEnqueuer(url) as enqueuer:
        a, b, runs = two_busy_workers(url, procs, enqueuer, "--drain-timeout", "0.5", env=LONG_LEASE)
        a_id = a.listening()
        stopped_at = time.monotonic()
        assert a.stop() == 0, "\n".join(a.errors[-20:])
        drained_in = time.monotonic() - stopped_at
        took = all_complete(enqueuer, runs, stopped_at)
    print(f"short drain: A exited {drained_in:.1f}s after SIGTERM; all runs completed {took:.1f}s after it")
    assert any(line.startswith(f"worker {a_id} finished 0 runs and handed back {RUNS // 2}") for line in a.lines), a.lines
    assert took < FINISH_WITHIN, "the handed-back runs waited for the lease to expire (120 s)"
    once_per_step(url, [f"s-{i:02d}" for i in range(RUNS)])
    assert repeated_only_where_cut(url, a.pid) == RUNS // 2


@pytest.mark.parametrize("comes_back", [False, True], ids=["never-back", "restarted-with-a-new-id"])
def test_a_killed_worker_s_runs_are_adopted(url: str, procs: list[Proc], comes_back: bool):
    """SIGKILL (a lost node), and SIGKILL followed by the same command again (a supervisor
    restart, which gets a new executor id): A's runs are adopted once its lease expires."""
    with RunEnqueuer(url) as enqueuer:
        a, b, runs = two_busy_workers(url, procs, enqueuer)
        a_id = a.listening()
        a.kill()
        stopped_at = time.monotonic()
        if comes_back:
            again = start_worker(url, concurrency=RUNS // 2, work_seconds=TOOL_SECONDS)
            procs.append(again)
            assert again.listening() != a_id
        took = all_complete(enqueuer, runs, stopped_at)
    print(f"kill ({'restarted' if comes_back else 'never back'}): all runs completed {took:.1f}s after SIGKILL")
    once_per_step(url, [f"s-{i:02d}" for i in range(RUNS)])
    assert repeated_only_where_cut(url, a.pid) == RUNS // 2
    adopted = {w["executor_id"]: w for w in workers_json(url)}[a_id]
    assert adopted["status"] == "adopted" and adopted["adopted_runs"] == RUNS // 2, adopted
    survivors = [b] + ([again] if comes_back else [])
    adopters = [p for p in survivors if any(line == f"adopted {RUNS // 2} runs of executor {a_id}" for line in p.lines)]
    assert len(adopters) == 1, [p.lines for p in survivors]
    cut = sorted({sid for sid, executions in tool_runs(url).items() if (a.pid, False) in executions})
    assert len(cut) == RUNS // 2
    says_adopted(url, cut[0], a_id, adopters[0].listening())
    kept = sorted(set(tool_runs(url)) - set(cut))[0]  # B's own run was never adopted
    assert "adopted" not in cli(url, "show", kept) and json.loads(cli(url, "show", kept, "--json"))["runs"][0]["adoptions"] == []


def test_a_frozen_worker_is_adopted_and_fenced_when_it_wakes(url: str, procs: list[Proc]):
    """SIGSTOP past the lease: B adopts A's runs; A, continued, finds its lease taken,
    stops taking work and exits 3, and no step is committed twice."""
    short = {"HELIX_LEASE_TTL": "3"}
    with RunEnqueuer(url) as enqueuer:
        a, b, runs = two_busy_workers(url, procs, enqueuer, env=short)
        a_id = a.listening()
        os.kill(a.pid, signal.SIGSTOP)
        stopped_at = time.monotonic()
        until(url, "SELECT state FROM helix.workers WHERE executor_id = %s", (a_id,), lambda s: s == "adopted",
              "A adopted", timeout=20)
        os.kill(a.pid, signal.SIGCONT)
        assert a.popen.wait(30) == 3, "\n".join(a.lines + a.errors[-20:])
        took = all_complete(enqueuer, runs, stopped_at)
    print(f"freeze: all runs completed {took:.1f}s after SIGSTOP")
    assert any(f"worker {a_id} lost its lease to" in line for line in a.lines), a.lines
    once_per_step(url, [f"s-{i:02d}" for i in range(RUNS)])
    with psycopg.connect(libpq_url(url)) as conn:
        late = conn.execute("SELECT count(*) FROM dbos.workflow_status WHERE executor_id = %s AND status = 'PENDING'",
                            (a_id,)).fetchone()[0]
    assert late == 0


def test_a_restart_with_the_same_id_keeps_dbos_recovery_and_is_not_adopted(url: str, procs: list[Proc]):
    """A stable executor id restarted at once takes its lease over; DBOS's recovery at
    launch resumes its runs and no other worker adopts them."""
    slow_start = {"HELIX_LEASE_TTL": "120", "HELIX_LEASE_RENEW": "2"}  # a restart however slow is not adopted
    with RunEnqueuer(url) as enqueuer:
        a, b, runs = two_busy_workers(url, procs, enqueuer, "--executor-id", "stable-a", env=slow_start)
        a.kill()
        stopped_at = time.monotonic()
        again = start_worker(url, executor_id="stable-a", concurrency=RUNS // 2, work_seconds=TOOL_SECONDS,
                             env=slow_start)
        procs.append(again)
        again.listening()
        all_complete(enqueuer, runs, stopped_at)
    once_per_step(url, [f"s-{i:02d}" for i in range(RUNS)])
    assert repeated_only_where_cut(url, a.pid) == RUNS // 2
    row = {w["executor_id"]: w for w in workers_json(url)}["stable-a"]
    assert (row["status"], row["pid"], row["adopted_by"]) == ("live", again.pid, None), row
    assert not any(line.startswith("adopted ") for line in b.lines), b.lines


def test_two_live_processes_never_share_an_executor_id(url: str, procs: list[Proc]):
    first = start_worker(url, executor_id="same")
    procs.append(first)
    first.listening()
    second = start_worker(url, executor_id="same")
    assert second.popen.wait(60) == 1
    error = "\n".join(second.errors)
    assert "executor id 'same' is held by a live process" in error and f"pid {first.pid}" in error, error
    with psycopg.connect(libpq_url(url)) as conn:
        assert conn.execute("SELECT pid FROM helix.workers WHERE executor_id = 'same'").fetchone()[0] == first.pid


def test_runs_of_another_version_wait_for_a_worker_of_their_version(url: str, procs: list[Proc]):
    """A worker adopts only its own application version's runs; `helix-dbos workers`
    says what the dead one's runs wait for, and a worker of that version adopts them."""
    short = {"HELIX_LEASE_TTL": "3"}
    with RunEnqueuer(url) as enqueuer:
        # A's tool outlasts the newer worker's start, however slow: A dies with both runs inside it.
        a = start_worker(url, concurrency=2, work_seconds=120, env={**short, "HELIX_SCALEOUT_VERSION": "1"})
        procs.append(a)
        a_id = a.listening()
        runs = [enqueuer.enqueue("scale-agent", f"v-{i}", session_id=f"v-{i}") for i in range(2)]
        until(url, "SELECT count(*) FROM scaleout.intervals WHERE ended IS NULL AND pid = %s", (a.pid,),
              lambda n: n == 2, "runs inside A's tool")
        newer = start_worker(url, concurrency=2, work_seconds=TOOL_SECONDS, env={**short, "HELIX_SCALEOUT_VERSION": "2"})
        procs.append(newer)
        newer.listening()
        a.kill()
        until(url, "SELECT expires_at < now() FROM helix.workers WHERE executor_id = %s", (a_id,), bool, "A expired")
        time.sleep(2)  # two of the newer worker's rounds
        dead = {w["executor_id"]: w for w in workers_json(url)}[a_id]
        assert dead["status"] == "dead" and dead["pending_runs"] == 2, dead
        assert dead["note"] == (
            f"died (its lease expired); its 2 runs wait for a live worker of version {dead['application_version']}"
        ), dead
        same = start_worker(url, concurrency=2, work_seconds=TOOL_SECONDS, env={**short, "HELIX_SCALEOUT_VERSION": "1"})
        procs.append(same)
        same_id = same.listening()
        assert [enqueuer.result(run, timeout=45).status for run in runs] == ["completed"] * 2
    assert {w["executor_id"]: w for w in workers_json(url)}[a_id]["adopted_by"] == same_id
    assert not any(line.startswith("adopted ") for line in newer.lines), newer.lines


def test_connection_blips_do_not_cost_a_worker_its_lease(url: str, procs: list[Proc]):
    """The test database's backends terminated every 0.3 s for longer than the lease: the
    lease thread reconnects and renews, nobody adopts the worker, and its runs complete."""
    short = {"HELIX_LEASE_TTL": "3"}
    with RunEnqueuer(url) as enqueuer:
        a = start_worker(url, concurrency=4, env=short)
        procs.append(a)
        a_id = a.listening()
        b = start_worker(url, concurrency=4, env=short)
        procs.append(b)
        b.listening()
        runs = [enqueuer.enqueue("scale-agent", f"blip-{i}", session_id=f"blip-{i}") for i in range(8)]
        with psycopg.connect(libpq_url(url), autocommit=True) as conn:
            ends = time.monotonic() + 6
            while time.monotonic() < ends:
                conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                             " WHERE datname = current_database() AND pid <> pg_backend_pid()")
                time.sleep(0.3)
        assert [enqueuer.result(run, timeout=60).status for run in runs] == ["completed"] * 8
    states = {w["executor_id"]: w["status"] for w in workers_json(url)}
    assert states[a_id] == "live" and a.popen.poll() is None, (states, a.lines, a.errors[-10:])
    assert not any(line.startswith("adopted ") for line in a.lines + b.lines)
