"""The tests of a module with a module-scoped fixture run in one pytest-xdist worker
(``tests/conftest.py`` marks them ``xdist_group``; ``--dist loadgroup``), so the fixture is
set up once, as in a serial run. This module is both the example and the check: its first
two tests share ``shared``; the last runs pytest on them with two workers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve()


@pytest.fixture(scope="module")
def shared() -> str:
    return os.environ.get("PYTEST_XDIST_WORKER", "serial")


def test_one_of_a_module_s_tests(shared: str) -> None:
    assert shared == os.environ.get("PYTEST_XDIST_WORKER", "serial")


def test_another_of_the_same_module_s_tests(shared: str) -> None:
    assert shared == os.environ.get("PYTEST_XDIST_WORKER", "serial")


def test_pytest_xdist_runs_a_module_s_grouped_tests_in_one_worker() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "-v", "-p", "no:cacheprovider", str(HERE), "-k", "of_a_module or of_the_same"],
        capture_output=True, text=True, timeout=300, cwd=HERE.parents[2],
    )
    assert done.returncode == 0, done.stdout + done.stderr
    ran = [line for line in done.stdout.splitlines() if " PASSED " in line]
    assert len(ran) == 2, done.stdout
    assert all(line.rstrip().endswith("@tests/unit/test_xdist_groups.py") for line in ran), done.stdout
    assert len({line.split()[0] for line in ran}) == 1, done.stdout  # one worker
