"""Where helix's bytes a turn go: each table's and index's growth on the peers' workload.

    python scripts/bench_tables.py [--database-url URL] [--turns 20] [--runs 10] [--peers-dir DIR]

Runs the peers' ``peer_helix.py`` (copied as ``bench_peers.py`` copies it) on a fresh
database: once with one run, to warm up, then with ``--runs`` runs of ``--turns`` turns.
It prints, for each relation of the ``helix`` and ``dbos`` schemas that grew in between,
its growth in bytes per turn of the measured runs (main fork, free-space and visibility
maps; pages are 8 KB, so a figure moves in steps of 8192 / (runs x turns)), then the
total, and the harness's own line (all tables with their indexes, and TOAST). The
database is on the server of --database-url (else the embedded Postgres) and is dropped
at the end.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import psycopg

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_peers import ROOT, drop_database, fresh_database, peer_copy  # noqa: E402

from helix_dbos._database import libpq_url, resolve_database_url  # noqa: E402

RELATION_SIZES = """
SELECT n.nspname || '.' || c.relname,
       pg_relation_size(c.oid, 'main') + pg_relation_size(c.oid, 'fsm') + pg_relation_size(c.oid, 'vm')
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname IN ('helix', 'dbos') AND c.relkind IN ('r', 'i', 't')
"""


def relation_sizes(url: str) -> dict[str, int]:
    with psycopg.connect(libpq_url(url)) as conn:
        return {name: size for name, size in conn.execute(RELATION_SIZES)}


def run_helix(script: Path, url: str, turns: int, runs: int) -> str:
    """One process of the peers' helix script; returns its figures' line."""
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=1800, cwd=script.parent,
        env={**os.environ, "PEER_DB": libpq_url(url), "TURNS": str(turns), "RUNS": str(runs), "HELIX_SRC": str(ROOT)},
    )
    if done.returncode != 0:
        raise RuntimeError(f"{script.name} failed ({done.returncode}):\n{done.stdout}\n{done.stderr[-3000:]}")
    return done.stdout.strip().splitlines()[-1]


def growth(server_url: str, peers_dir: Path, turns: int, runs: int) -> tuple[dict[str, float], str]:
    """Bytes per turn by relation, and the harness's line, for ``runs`` runs of ``turns`` turns."""
    name = f"helix_tables_{os.getpid()}"
    url = fresh_database(server_url, name)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            script = peer_copy(peers_dir, Path(tmp), "peer_helix.py")
            run_helix(script, url, turns, 1)
            before = relation_sizes(url)
            line = run_helix(script, url, turns, runs)
            after = relation_sizes(url)
    finally:
        drop_database(server_url, name)
    per_turn = {rel: (size - before.get(rel, 0)) / (turns * runs) for rel, size in after.items()}
    return {rel: b for rel, b in sorted(per_turn.items()) if b}, line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--peers-dir", type=Path, default=ROOT.parent / "shared" / "peers")
    args = parser.parse_args()
    server_url = resolve_database_url(args.database_url, allow_embedded=True)
    per_turn, line = growth(server_url, args.peers_dir, args.turns, args.runs)
    print(f"growth per turn by relation (K = {args.turns}, {args.runs} runs after a warm-up)")
    for rel, size in per_turn.items():
        print(f"  {rel:<58} {size:>7.0f}")
    print(f"  {'total':<58} {sum(per_turn.values()):>7.0f}")
    print(f"harness: {line}")


if __name__ == "__main__":
    main()
