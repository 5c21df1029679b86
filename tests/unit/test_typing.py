"""The package type-checks, and so does its public API as a user sees it. One
``mypy --strict`` run (mypy is slow to start) checks both: the ``helix_dbos`` package
itself, and a small user script to which a ``reveal_type`` of every name ``helix_dbos``
exports is added. No name may be ``Any``, which the lazy imports would give without the
``TYPE_CHECKING`` imports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

import helix_dbos

SCRIPT = Path(__file__).resolve().parents[1] / "typing" / "user_script.py"
PACKAGE = Path(helix_dbos.__file__).resolve().parent


class MypyRun(NamedTuple):
    """What ``mypy --strict`` said about the package and the user script."""

    script: Path
    """The user script as checked (with its ``reveal_type`` lines)."""
    done: subprocess.CompletedProcess[str]

    def errors(self, in_script: bool) -> list[str]:
        """The errors in the user script, or (``in_script`` False) everywhere else."""
        errors = [line for line in self.done.stdout.splitlines() if ": error:" in line]
        return [line for line in errors if line.startswith(str(self.script)) == in_script]


def mypy(*paths: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", "--no-incremental", *map(str, paths)],
        capture_output=True, text=True, timeout=1800,  # a hang, not slowness: a minute alone, more beside other tests
    )


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> MypyRun:
    script = tmp_path_factory.mktemp("typing") / "revealed.py"
    script.write_text(
        SCRIPT.read_text() + "\n\nimport helix_dbos\n\n"
        + "".join(f"reveal_type(helix_dbos.{n})\n" for n in helix_dbos.__all__)
    )
    return MypyRun(script, mypy(PACKAGE, script))


def test_the_package_passes_mypy_strict(checked: MypyRun) -> None:
    """mypy checked the package (exit status 2 is mypy failing to run) and found no error in it."""
    assert checked.done.returncode in (0, 1), checked.done.stderr
    assert checked.errors(in_script=False) == [], checked.done.stdout


def test_a_user_script_passes_mypy_strict_and_no_exported_name_is_any(checked: MypyRun) -> None:
    names = helix_dbos.__all__
    notes = [line for line in checked.done.stdout.splitlines() if "Revealed type is" in line]
    assert checked.errors(in_script=True) == [], checked.done.stdout
    assert len(notes) == len(names), checked.done.stdout
    any_typed = [name for name, note in zip(names, notes) if note.endswith('"Any"')]
    assert any_typed == [], f"exported names a type checker sees as Any: {any_typed}"
