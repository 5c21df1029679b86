"""The layers keep their imports: pure layers never import DBOS, the database drivers or
litellm; nothing below the façade imports it; the workflow side never imports the client."""

import subprocess
import sys

FORBIDDEN = ("dbos", "psycopg", "litellm", "sqlalchemy")

PROBE = f"""
import sys
import helix_dbos.orchestration, helix_dbos.agents, helix_dbos.tools, helix_dbos.state
import helix_dbos.types, helix_dbos.errors, helix_dbos.events, helix_dbos.answers, helix_dbos.subagents, helix_dbos._text
import helix_dbos._deltas, helix_dbos.sse, helix_dbos._ui_stream
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


LAYER_PROBE = """
import sys, helix_dbos._durable.workflow, helix_dbos._store.writes, helix_dbos._store.reads
print(",".join(sorted(m for m in sys.modules if m.startswith(("helix_dbos._client", "helix_dbos._cli", "helix_dbos.server")))))
"""


def test_the_workflow_side_and_the_store_never_import_the_client_side():
    completed = subprocess.run([sys.executable, "-c", LAYER_PROBE], capture_output=True, text=True, check=True)

    assert completed.stdout.strip() == ""


SERVER_PROBE = """
import sys, helix_dbos, helix_dbos._client.executor, helix_dbos.admin, helix_dbos._cli.main
print(",".join(sorted({m.split(".")[0] for m in sys.modules} & {"starlette", "uvicorn"})
               + [m for m in sys.modules if m.startswith("helix_dbos.server")]))
"""


def test_nothing_but_the_server_needs_the_server_extra():
    completed = subprocess.run([sys.executable, "-c", SERVER_PROBE], capture_output=True, text=True, check=True)

    assert completed.stdout.strip() == ""
