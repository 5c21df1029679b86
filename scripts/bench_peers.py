"""helix-dbos side by side with Pydantic AI + DBOS and LangGraph + PostgresSaver, on the
peers' own workload and harness (../shared/peers/).

    python scripts/bench_peers.py [--database-url URL] [--rounds 3] [--runs 10] [--peers-dir DIR]

One run = K model turns; each turn but the last asks for two tool calls (one appends to
the state), the last answers; the model answers instantly. Each peer script makes one
warm-up run, then ``--runs`` runs, and prints microseconds per turn, Postgres commits per
turn and bytes per turn (growth of all its tables with their indexes and TOAST).

Commits are every transaction of the script's database during its runs. Postgres counts
them in ``pg_stat_database.xact_commit``, but a backend reports its counts only when a
transaction ends at least 1 s after its last report, or after 10 s idle; the peers' scripts
read the count 1 s after their runs, so part of a run's commits would land outside the
window. Each script therefore runs from a copy that reads the count after 11 s of quiet,
before and after the runs, then counts 11 more seconds of quiet and takes out DBOS's idle
polling at that rate: the same count as ``bench.py``'s. Nothing else in the copies changes.

The scripts run interleaved, ``--rounds`` times, each on a fresh database of its own on the
server of --database-url; the table shows medians, and below it, round by round, the
ratio of a helix turn at K = 20 to its floor and to Pydantic AI + DBOS's: the systems of
one round run minutes apart, so these show how far a round's noise reaches. A row under
helix's is its floor: a copy of helix's script whose measured runs are ``bench.py``'s
bare DBOS workflow, the same DBOS calls per turn with empty bodies (an ``llm`` step, two
tool steps in parallel but on the last turn, one plain statement for the step commit).
Pydantic AI runs with its tools as DBOS steps (``TOOLS_AS_STEPS=1``) and at K = 20 only
(its default request limit is 50 turns). helix's DBOS config turns off DBOS's ping before
each use of a pooled connection (``helix_dbos._client.launcher.SYSTEM_DATABASE_ENGINE``);
so that the comparison shows what that setting does and what helix does, Pydantic AI also
runs from a copy of its script with the same setting.

The peers' dependencies go into a virtualenv of their own (``$HELIX_PEERS_VENV``, default
``~/.cache/helix-peers``), created on first use; helix runs from this checkout's venv.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import psycopg

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from helix_dbos._database import libpq_url, render_url, resolve_database_url  # noqa: E402

PEER_PACKAGES = ["pydantic-ai-slim[dbos]", "langgraph", "langgraph-checkpoint-postgres", "psycopg[binary,pool]"]
FIGURES = re.compile(r"(\d+) us/turn, (-?[\d.]+) commits/turn, (-?\d+) bytes/turn")
RUNS = (  # label, script, K, environment, which python
    ("helix-dbos", "peer_helix.py", 20, {}, "helix"),
    ("helix-dbos", "peer_helix.py", 200, {}, "helix"),
    ("  DBOS floor of helix's calls", "peer_floor.py", 20, {}, "helix"),
    ("Pydantic AI + DBOS, tools as steps", "peer_pydantic_ai.py", 20, {"TOOLS_AS_STEPS": "1"}, "peers"),
    ("  the same, DBOS without the ping", "peer_pydantic_ai_no_ping.py", 20, {"TOOLS_AS_STEPS": "1"}, "peers"),
    ("LangGraph + PostgresSaver", "peer_langgraph.py", 20, {}, "peers"),
    ("LangGraph + PostgresSaver", "peer_langgraph.py", 60, {}, "peers"),
)


def peers_python() -> Path:
    """The peers' virtualenv's python, created with their packages if missing."""
    venv = Path(os.environ.get("HELIX_PEERS_VENV", "~/.cache/helix-peers")).expanduser()
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *PEER_PACKAGES], check=True)
    return python


QUIET = 11
"""Seconds of quiet before each reading of ``xact_commit``: a busy backend reports its counts
when a transaction ends at least 1 s after its last report, an idle one within 10 s."""

EXACT_COUNTS = [  # every copy: counts read after QUIET s of quiet, with DBOS's idle polling taken out
    (r"time\.sleep\(1\)(\n\s*)x0, b0 = stats\(\)", rf"time.sleep({QUIET})\1x0, b0 = stats()"),
    (
        r"time\.sleep\(1\)(\n\s*)x1, b1 = stats\(\)",
        rf"time.sleep({QUIET})\1x1, b1 = stats()"
        rf"\1time.sleep({QUIET})\1x1 -= (stats()[0] - x1) * (dt + {QUIET}) / {QUIET}  # the idle polling's commits",
    ),
]
COPIES = {  # the scripts run: copies of the peers' scripts, changed only where named: (peer's script, changes)
    "peer_helix.py": ("peer_helix.py", []),
    "peer_floor.py": (  # helix's harness and DBOS calls, empty bodies: bench.py's floor, the peers' turns
        "peer_helix.py",
        [
            (
                r"(\n(\s*))(\w+)\.register\(agent\)\n",
                r"\1\3.register(agent)\1from scripts.bench import floor_workflow_factory"
                r"\1floor = floor_workflow_factory(\3)\n",
            ),
            (  # each measured run: the floor workflow for the K model calls, instead of the agent
                r"(\n\s*for \w+ in range\(RUNS\):\n(\s*))\w+ = \w+\.execute\(agent, [^\n]*\n\s*assert [^\n]*\n",
                r"\1assert DBOS.start_workflow(floor, K - 1).get_result() == K - 1\n",
            ),
            (r'print\(f"helix_dbos K=', 'print(f"DBOS floor K='),
        ],
    ),
    "peer_pydantic_ai.py": ("peer_pydantic_ai.py", []),
    "peer_pydantic_ai_no_ping.py": (
        "peer_pydantic_ai.py",
        [(r'("system_database_url": DB)\}', r'\1, "db_engine_kwargs": {"pool_pre_ping": False}}')],
    ),
    "peer_langgraph.py": ("peer_langgraph.py", []),
}


def peer_copy(peers_dir: Path, into: Path, name: str) -> Path:
    """The copy ``name`` of a peer's script, written into ``into``: each change of
    :data:`COPIES` and :data:`EXACT_COUNTS` is a regular expression that must match once."""
    source, changes = COPIES[name]
    text = (peers_dir / source).read_text()
    for pattern, replacement in [*changes, *EXACT_COUNTS]:
        text, found = re.subn(pattern, replacement, text)
        if found != 1:
            raise RuntimeError(f"{source} has {found} matches of {pattern!r}, which {name} changes; expected 1")
    target = into / name
    target.write_text(text)
    return target


def fresh_database(server_url: str, name: str) -> str:
    with psycopg.connect(libpq_url(server_url), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return render_url(server_url, database=name)


def drop_database(server_url: str, name: str) -> None:
    with psycopg.connect(libpq_url(server_url), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def run_once(
    script: Path, python: Path, server_url: str, turns: int, runs: int, env: dict[str, str]
) -> tuple[float, ...]:
    name = f"helix_peer_{os.getpid()}"
    url = fresh_database(server_url, name)
    try:
        done = subprocess.run(
            [str(python), str(script)], capture_output=True, text=True, timeout=900, cwd=script.parent,
            env={
                **os.environ, **env,
                "PEER_DB": libpq_url(url), "TURNS": str(turns), "RUNS": str(runs), "HELIX_SRC": str(ROOT),
            },
        )
    finally:
        drop_database(server_url, name)
    found = FIGURES.search(done.stdout)
    if done.returncode != 0 or found is None:
        raise RuntimeError(f"{script.name} K={turns} failed ({done.returncode}):\n{done.stdout}\n{done.stderr[-3000:]}")
    return tuple(float(value) for value in found.groups())


Samples = dict[int, list[tuple[float, ...]]]
"""Each row of :data:`RUNS` (by index): its figures (us/turn, commits/turn, bytes/turn), one per round."""

COMPARED = (0, [(2, "its floor"), (3, "Pydantic AI + DBOS")])
"""The ratios printed per round: helix at K = 20 (a row of :data:`RUNS`) to each of these rows."""


def run(server_url: str, peers_dir: Path, rounds: int, runs: int = 10) -> Samples:
    pythons = {"helix": Path(sys.executable), "peers": peers_python()}
    samples: Samples = {n: [] for n in range(len(RUNS))}
    with tempfile.TemporaryDirectory() as tmp:
        scripts = {name: peer_copy(peers_dir, Path(tmp), name) for name in COPIES}
        for _ in range(rounds):
            for n, (_, script, turns, env, python) in enumerate(RUNS):
                path = scripts[script]
                samples[n].append(run_once(path, pythons[python], server_url, turns, runs, env))
    return samples


def round_ratios(samples: Samples, row: int, other: int) -> list[float]:
    """Time per turn of ``row`` over that of ``other``, in each round: the two ran minutes
    apart, so the spread of these shows how far one round's noise reaches.

        >>> round_ratios({0: [(12.0, 9.5, 4900.0), (15.0, 9.5, 4900.0)], 2: [(10.0, 6.4, 980.0), (10.0, 6.4, 980.0)]}, 0, 2)
        [1.2, 1.5]
    """
    return [ours[0] / theirs[0] for ours, theirs in zip(samples[row], samples[other])]


def report(samples: Samples, rounds: int) -> None:
    print(f"side by side, the peers' workload and harness (medians of {rounds} interleaved rounds)")
    print(f"{'system':<36} {'K':>3} {'us/turn':>9} {'commits/turn':>13} {'bytes/turn':>11}")
    for n, (label, _, turns, _, _) in enumerate(RUNS):
        us, commits, size = (statistics.median(s[i] for s in samples[n]) for i in range(3))
        print(f"{label:<36} {turns:>3} {us:>9.0f} {commits:>13.1f} {size:>11.0f}")
    row, others = COMPARED
    for other, name in others:
        ratios = " ".join(f"{r:.2f}x" for r in round_ratios(samples, row, other))
        print(f"helix-dbos K=20 to {name}, round by round: {ratios}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=10, help="measured runs of each script in a round")
    parser.add_argument("--peers-dir", type=Path, default=ROOT.parent / "shared" / "peers")
    args = parser.parse_args()
    server_url = resolve_database_url(args.database_url, allow_embedded=True)
    report(run(server_url, args.peers_dir, args.rounds, args.runs), args.rounds)


if __name__ == "__main__":
    main()
