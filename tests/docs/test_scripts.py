"""Every script under ``scripts/`` that the docs tell you to run (the benchmarks, the
screenshots, the replay recorder) imports with the code checked out: a module renamed or
moved fails here, not the day someone runs the script. Importing runs no ``main()``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted(p for p in (ROOT / "scripts").glob("*.py"))

IMPORT_EACH = """
import importlib.util, json, sys, traceback
failed = {}
for path in sys.argv[1:]:
    spec = importlib.util.spec_from_file_location("script_under_test", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except BaseException:
        failed[path] = traceback.format_exc(limit=3)
print(json.dumps(failed))
"""


def test_every_script_imports() -> None:
    assert len(SCRIPTS) >= 10, SCRIPTS
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_EACH, *map(str, SCRIPTS)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    failed = json.loads(done.stdout.strip().splitlines()[-1])
    assert failed == {}, "\n".join(f"{path}:\n{error}" for path, error in failed.items())
