#!/usr/bin/env bash
# Run the test suite: ./scripts/test.sh [pytest args...]  (works from any directory).
#
# Runs in parallel: pytest-xdist with $HELIX_TEST_WORKERS worker processes (default 4;
# tests mostly wait on processes and Postgres, so more workers than cores pays). Giving
# -n/--numprocesses yourself, -p no:xdist or --pdb replaces that (-n 0 runs serially).
# Fast part alone: ./scripts/test.sh -m unit (no database, no processes; in one process,
# as those tests only compute; it skips the installs below).
#
# Creates or reuses .venv (see scripts/_venv.sh). Tests use HELIX_TEST_DATABASE_URL when
# it is set (a server URL; each run creates and drops its own databases there), else an
# embedded Postgres in .helix/test-pgdata. Installs Debian's chromium and chromium-driver
# when missing (as root), for the console's real-browser test, and Debian's prometheus for
# the metrics test; Arize Phoenix in .helix/phoenix-venv for the tracing test; npm ci for
# the chat tests' AI SDK client when its node_modules is missing.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"
if [[ " $* " != *" -m unit "* ]]; then  # the unit tests need none of these programs
    source scripts/_browser.sh
    source scripts/_prometheus.sh
    source scripts/_phoenix.sh
    source scripts/_node.sh
fi
if [[ " $* " == *" -m unit "* ]]; then
    parallel=(-n "${HELIX_TEST_WORKERS:-0}")  # they only compute: a worker's start costs more than it saves
else
    # the longest files first, in the order tests/conftest.py's RUN_FIRST gives them
    parallel=(-n "${HELIX_TEST_WORKERS:-4}" --no-loadscope-reorder)
fi
for arg in "$@"; do
    case "$arg" in
        -n | -n* | --numprocesses | --numprocesses=* | no:xdist | -pno:xdist | --pdb) parallel=() ;;
    esac
done
exec .venv/bin/python -m pytest "${parallel[@]}" "$@"
