"""Every ```python block of README.md and docs/ runs, as a reader would run it
(``tests/docs/doc_snippets.py`` says how), against a migrated database of its own: a snippet
cannot rot."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from helix_dbos._store.migrations import migrate

from doc_snippets import snippets  # type: ignore[import-not-found]

ROOT = Path(__file__).resolve().parents[2]
RUNNER = Path(__file__).with_name("doc_snippets.py")
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_python_block_runs(document: Path, make_database: Callable[[], str], tmp_path: Path) -> None:
    count = len(snippets(document.read_text()))
    if count == 0:
        return  # a page without python blocks has nothing to run
    url = make_database()
    migrate(url)  # as `helix-dbos migrate` did for the reader
    env = {"PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin", "HOME": str(tmp_path),
           "HELIX_DATABASE_URL": url, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run([sys.executable, str(RUNNER), str(document)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert done.stdout.splitlines()[-1] == f"ran {count} python blocks"


def test_the_snippet_reader_finds_blocks_files_and_arguments() -> None:
    markdown = 'x\n```python\na = 1\n```\n<!-- args: s-1 --resume -->\n```python\n"""w.py: a worker."""\n```\n'
    found = snippets(markdown)
    assert [(s.line, s.code, s.file_name, s.args) for s in found] == [
        (2, "a = 1\n", None, []), (6, '"""w.py: a worker."""\n', "w.py", ["s-1", "--resume"]),
    ]
