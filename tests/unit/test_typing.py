"""The public API type-checks: ``mypy --strict`` on a small user script passes, and every
name ``helix_dbos`` exports has its real type for a type checker (none is ``Any``, which
the lazy imports would give without the ``TYPE_CHECKING`` imports)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import helix_dbos

SCRIPT = Path(__file__).resolve().parents[1] / "typing" / "user_script.py"


def mypy(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", "--no-incremental", str(path)],
        capture_output=True, text=True, timeout=300,
    )


def test_a_user_script_passes_mypy_strict_and_no_exported_name_is_any(tmp_path: Path) -> None:
    script = tmp_path / "revealed.py"
    names = helix_dbos.__all__
    script.write_text(
        SCRIPT.read_text() + "\n\nimport helix_dbos\n\n" + "".join(f"reveal_type(helix_dbos.{n})\n" for n in names)
    )
    done = mypy(script)
    notes = [line for line in done.stdout.splitlines() if "Revealed type is" in line]
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert errors == [], done.stdout
    assert len(notes) == len(names), done.stdout
    any_typed = [name for name, note in zip(names, notes) if note.endswith('"Any"')]
    assert any_typed == [], f"exported names a type checker sees as Any: {any_typed}"
