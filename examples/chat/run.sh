#!/usr/bin/env bash
# Build the chat page (npm ci, esbuild) and serve the example on http://127.0.0.1:8000.
#   HELIX_DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres examples/chat/run.sh
# Runs from the repository's .venv (./scripts/test.sh --co -q creates it) or the current python.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
(cd web && { [ -d node_modules ] || npm ci --no-audit --no-fund --loglevel=error; } && npm run --silent build)
PYTHON="../../.venv/bin/python"; [ -x "$PYTHON" ] || PYTHON=python3
exec "$PYTHON" -m uvicorn app:app --host "${HOST:-127.0.0.1}" --port "${PORT:-8000}"
