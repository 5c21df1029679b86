#!/usr/bin/env bash
# Run the test suite: ./scripts/test.sh [pytest args...]  (works from any directory).
#
# Creates or reuses .venv (see scripts/_venv.sh). Tests use HELIX_TEST_DATABASE_URL when
# it is set (a server URL; each run creates and drops its own databases there), else an
# embedded Postgres in .helix/test-pgdata. Installs Debian's chromium and chromium-driver
# when missing (as root), for the console's real-browser test, and Debian's prometheus for
# the metrics test; Arize Phoenix in .helix/phoenix-venv for the tracing test; npm ci for
# the chat tests' AI SDK client when its node_modules is missing.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"
source scripts/_browser.sh
source scripts/_prometheus.sh
source scripts/_phoenix.sh
source scripts/_node.sh
exec .venv/bin/python -m pytest "$@"
