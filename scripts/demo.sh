#!/usr/bin/env bash
# Run the demo: ./scripts/demo.sh [helix-dbos demo args...]  (works from any directory).
#
# With no HELIX_DATABASE_URL it uses the embedded Postgres in .helix/pgdata.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"
exec .venv/bin/helix-dbos demo "$@"
