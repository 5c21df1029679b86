"""The pure layers never import DBOS, the database drivers or litellm."""

import subprocess
import sys

FORBIDDEN = ("dbos", "psycopg", "litellm", "sqlalchemy")

PROBE = f"""
import sys
import helix_dbos.orchestration, helix_dbos.agents, helix_dbos.tools
loaded = sorted({{name.split(".")[0] for name in sys.modules}} & set({FORBIDDEN!r}))
print(",".join(loaded))
"""


def test_pure_layers_do_not_import_io_libraries():
    completed = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True
    )

    assert completed.stdout.strip() == ""


def test_probe_detects_an_io_import():
    """The probe itself works: importing one of the libraries is reported."""
    probe = PROBE.replace(
        "import helix_dbos.orchestration", "import sqlalchemy, helix_dbos.orchestration"
    )
    completed = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )

    assert completed.stdout.strip() == "sqlalchemy"
