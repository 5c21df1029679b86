"""Postgres restarts (of the test's own cluster) while 20 sessions run: no run fails,
every run completes once, nothing is written twice."""

from __future__ import annotations

import time

from own_cluster import Cluster  # type: ignore[import-not-found]
from storm import assert_all_completed_once, start_storm_app  # type: ignore[import-not-found]


def test_postgres_restarts_mid_run_fail_no_run(own_cluster: Cluster) -> None:
    url = own_cluster.create_database("restart")
    app = start_storm_app(url)
    for _ in range(2):
        time.sleep(0.8)
        own_cluster.restart()
    assert_all_completed_once(url, app)
