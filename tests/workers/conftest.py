"""Fixtures of the worker tests: ``url``, a migrated database of the test's own with the
``scaleout.intervals`` table the scale-out app's tools record their work in, and
``procs``, the list a test puts the processes it starts in (stopped when it ends)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from worker_kit import Proc, scale_database


@pytest.fixture
def url(make_database: Callable[[], str]) -> str:
    return scale_database(make_database)


@pytest.fixture
def procs() -> Iterator[list[Proc]]:
    started: list[Proc] = []
    yield started
    for proc in started:
        proc.stop(timeout=5)
