#!/usr/bin/env bash
# Check helix-dbos on both ends of the dbos range pyproject.toml declares:
#   HELIX_TEST_DATABASE_URL=postgresql://postgres@127.0.0.1:5432/ ./scripts/check_dbos_range.sh [pytest args...]
#
# For the lowest and the highest dbos release the range admits (as PyPI lists them), it
# makes a fresh virtualenv in .helix/dbos-range/<version>, installs helix-dbos with that
# dbos pinned, and runs the smoke test (the schema, a migration, a run with tools, HITL
# and streaming) and the crash suite (workers SIGKILLed mid-run, recovered). Exits non-zero
# at the first version that fails. helix's triggers on DBOS's tables and the private DBOS
# names it uses are checked by these tests (tests/database/test_schema.py,
# tests/workers/test_adoption.py): widen the range in pyproject.toml, and the DBOS
# schema versions in helix_dbos/_store/dbos_tables.py, only once this passes.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
: "${HELIX_TEST_DATABASE_URL:?set HELIX_TEST_DATABASE_URL to a Postgres server URL (tests create their own databases)}"
PYTHON="${PYTHON:-python3}"

spec="$("$PYTHON" - <<'PY'
import re, tomllib
deps = tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]
print(next(re.sub(r"^dbos\s*", "", d) for d in deps if re.match(r"dbos\s*[<>=!~]", d)))
PY
)"
mkdir -p .helix/dbos-range
if [ ! -x .helix/dbos-range/tool/bin/python ]; then
    "$PYTHON" -m venv .helix/dbos-range/tool
    .helix/dbos-range/tool/bin/python -m pip install --quiet --disable-pip-version-check packaging
fi
read -r lowest highest < <(.helix/dbos-range/tool/bin/python - "$spec" <<'PY'
import json, subprocess, sys
from packaging.specifiers import SpecifierSet
from packaging.version import Version
listed = subprocess.run(
    [sys.executable, "-m", "pip", "index", "versions", "dbos", "--disable-pip-version-check"],
    check=True, capture_output=True, text=True,
).stdout
available = next(line for line in listed.splitlines() if line.startswith("Available versions:"))
versions = sorted(Version(v.strip()) for v in available.split(":", 1)[1].split(","))
allowed = [v for v in versions if v in SpecifierSet(sys.argv[1])]
if not allowed:
    sys.exit(f"no dbos release on the index is in {sys.argv[1]}")
print(allowed[0], allowed[-1])
PY
)
echo "dbos$spec: checking $lowest and $highest" >&2

SMOKE=(
    tests/database/test_schema.py
    tests/database/test_database_setup.py
    tests/runtime/test_runtime_loop.py
    tests/runtime/test_hitl_approval.py
    tests/runtime/test_runtime_streaming.py
    tests/workers/test_adoption.py
)
for version in $(printf '%s\n' "$lowest" "$highest" | sort -u); do
    venv=".helix/dbos-range/$version"
    rm -rf "$venv"
    "$PYTHON" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e ".[dev,server]" "dbos==$version"
    echo "dbos $version: $("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("dbos"))') installed" >&2
    "$venv/bin/python" -m pytest -q -x -p no:cacheprovider "${SMOKE[@]}" tests/crash "$@"
    echo "dbos $version: passed" >&2
done
