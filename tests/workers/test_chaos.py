"""Chaos: three workers, 100 sessions of five steps, and for two minutes, every 5 to 10 s,
a random worker SIGKILLed or SIGTERMed and a fresh one (a new executor id) started.

At the end every session is completed with the transcript of an undisturbed run and each
step committed once; a tool call ran more than once only where a stopped worker had it in
flight (killed, or handed back at the end of its drain's grace period). The test prints the adoption latency
after each kill (p50/p99) and the runs handed back by each drain.
"""

from __future__ import annotations

import json
import random
import statistics
import time

import psycopg

from helix_dbos._client.queues import RunEnqueuer
from helix_dbos._database import libpq_url
from worker_kit import Proc, start_worker, until

SESSIONS = 100
STEPS = 5
WORKERS = 3
CONCURRENCY = 2
CHAOS_SECONDS = 120.0
DRAIN_TIMEOUT = "2"
SEED = 20261126


def transcript(conn: psycopg.Connection, session_id: str) -> str:
    """The session's messages as JSON, with the session id written as ``<S>``."""
    messages = [r[0] for r in conn.execute(
        "SELECT message FROM helix.messages WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %s)"
        " ORDER BY seq", (session_id,))]
    return json.dumps(messages, sort_keys=True).replace(session_id, "<S>")


def fresh_worker(url: str, procs: list[Proc]) -> tuple[Proc, str]:
    proc = start_worker(url, "--drain-timeout", DRAIN_TIMEOUT, concurrency=CONCURRENCY)
    procs.append(proc)
    return proc, proc.listening()


def test_runs_survive_two_minutes_of_killed_and_drained_workers(url: str, procs: list[Proc]):
    rng = random.Random(SEED)
    live = [fresh_worker(url, procs) for _ in range(WORKERS)]
    with RunEnqueuer(url) as enqueuer:
        reference = enqueuer.result(enqueuer.enqueue("chaos-agent", "ref", session_id="ref"), timeout=60)
        assert reference.status == "completed", reference
        sessions = [f"c-{i:03d}" for i in range(SESSIONS)]
        runs = [enqueuer.enqueue("chaos-agent", sid, session_id=sid) for sid in sessions]

        killed: list[tuple[str, int, float]] = []  # executor id, pid, when (epoch)
        drained: list[tuple[str, Proc]] = []
        ends = time.monotonic() + CHAOS_SECONDS
        while time.monotonic() < ends:
            time.sleep(rng.uniform(5, 10))
            victim, victim_id = live.pop(rng.randrange(len(live)))
            if rng.random() < 0.5:
                victim.kill()
                killed.append((victim_id, victim.pid, time.time()))
            else:
                victim.popen.send_signal(15)
                drained.append((victim_id, victim))
            live.append(fresh_worker(url, procs))

        results = [enqueuer.result(run, timeout=180) for run in runs]
    assert [r for r in results if r.status != "completed"] == [], "\n".join(
        line for proc in procs for line in proc.errors if "rror" in line)[-5000:]

    for victim_id, victim in drained:
        assert victim.exit_code(30) == 0, "\n".join(victim.errors[-20:])
    handed_back = [next(line for line in victim.lines if " handed back " in line) for _, victim in drained]
    killed_ids = [eid for eid, _, _ in killed]
    until(url, "SELECT count(*) FROM helix.workers WHERE state = 'adopted' AND executor_id = ANY(%s)", (killed_ids,),
          lambda n: n == len(killed_ids), "every killed worker adopted (the last may have had no run left)", timeout=40)
    with psycopg.connect(libpq_url(url)) as conn:
        adopted_at = dict(conn.execute(
            "SELECT executor_id, extract(epoch FROM adopted_at) FROM helix.workers WHERE state = 'adopted'").fetchall())
        latencies = sorted(float(adopted_at[eid]) - at for eid, _, at in killed if eid in adopted_at)
        expected = transcript(conn, "ref")
        for sid in sessions:
            assert transcript(conn, sid) == expected, sid
            types = [r[0] for r in conn.execute(
                "SELECT type FROM helix.events WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %s)",
                (sid,))]
            counts = {t: types.count(t) for t in ("run_start", "step_finish", "finish")}
            assert counts == {"run_start": 1, "step_finish": STEPS, "finish": 1}, (sid, counts)
        intervals = conn.execute("SELECT session_id, pid, ended IS NOT NULL FROM scaleout.intervals"
                                 " WHERE session_id LIKE 'c-%' ORDER BY id").fetchall()

    stopped_pids = {pid for _, pid, _ in killed} | {victim.pid for _, victim in drained}
    calls: dict[str, list[tuple[int, bool]]] = {}
    for call, pid, ended in intervals:  # in the order they started
        calls.setdefault(call, []).append((pid, ended))
    assert len(calls) == SESSIONS * (STEPS - 1)
    for call, executions in calls.items():
        assert executions[-1][1], (call, executions)
        assert all(pid in stopped_pids for pid, _ in executions[:-1]), ("a call ran again on a live worker", call, executions)
    repeated = sum(len(executions) - 1 for executions in calls.values())

    print(f"\nchaos (seed {SEED}): {len(killed)} SIGKILLs, {len(drained)} SIGTERMs, {repeated} tool calls cut and run again")
    if latencies:
        p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
        print(f"adoption after SIGKILL: p50 {statistics.median(latencies):.1f}s, p99 {p99:.1f}s ({len(latencies)} kills)")
    for line in handed_back:
        print(f"drain: {line}")
    assert len(latencies) == len(killed), "a killed worker was never adopted"
    assert killed or drained
