"""A type checker follows an editable install made the way the README says
(``--config-settings editable_mode=compat``: a ``.pth`` line naming the checkout), where
the default editable install (an import hook, which mypy cannot run) hides the package.

The check builds both layouts of site-packages by hand in a bare virtualenv (what pip
writes for each mode), so it needs no index and no build."""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

import helix_dbos

CHECKOUT = Path(helix_dbos.__file__).resolve().parents[1]
DEPENDENCIES = next(Path(p) for p in sys.path if p.endswith("site-packages") and Path(p, "pydantic").is_dir())


def revealed(tmp_path: Path, editable_line: str) -> str:
    """What mypy reveals for ``helix_dbos.DBOSAgentExecutor`` in a user's app, with the
    package installed by ``editable_line`` (the ``.pth`` line an editable install writes)."""
    env = tmp_path / "env"
    venv.create(env, with_pip=False)
    site = next(env.glob("lib/python3*/site-packages"))
    (site / "dependencies.pth").write_text(f"{DEPENDENCIES}\n")
    (site / "__editable__.helix_dbos.pth").write_text(editable_line + "\n")
    app = tmp_path / "app.py"
    app.write_text("import helix_dbos\nreveal_type(helix_dbos.DBOSAgentExecutor)\n")
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "--python-executable", str(env / "bin" / "python"), str(app)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    return done.stdout


def test_the_compat_editable_install_is_seen_by_mypy(tmp_path: Path) -> None:
    out = revealed(tmp_path, str(CHECKOUT))
    assert "helix_dbos._client.executor.DBOSAgentExecutor" in out, out


def test_the_default_editable_install_hides_the_package_as_the_readme_warns(tmp_path: Path) -> None:
    out = revealed(tmp_path, "import __editable___helix_dbos_finder; __editable___helix_dbos_finder.install()")
    assert 'Revealed type is "Any"' in out, out
    readme = (CHECKOUT / "README.md").read_text()
    assert "--config-settings editable_mode=compat" in readme
