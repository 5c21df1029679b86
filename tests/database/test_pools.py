"""helix's pools against a server that drops their idle connections (terminated backends
of this module's own database)."""

from __future__ import annotations

import threading

from backends import terminate_other_backends

from helix_dbos._store.pools import Pool, create_pool


def fill(pool: Pool, size: int) -> None:
    """Leave ``size`` idle connections in ``pool``: hold that many at once, then return them."""
    held = threading.Barrier(size)

    def hold() -> None:
        with pool.connection() as conn:
            conn.execute("SELECT 1")
            held.wait()

    threads = [threading.Thread(target=hold) for _ in range(size)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def test_a_pool_whose_idle_connections_were_all_terminated_hands_out_a_live_one_at_once(fresh_database_url: str) -> None:
    pool = create_pool(fresh_database_url, max_size=3, name="lost-idle")
    try:
        fill(pool, 3)
        assert pool.get_stats()["pool_available"] == 3
        assert terminate_other_backends(fresh_database_url) == 3
        # psycopg_pool's own check would wait 1 s, then 2 s between the dead ones: past 2 s
        with pool.connection(timeout=2.0) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        pool.close()
