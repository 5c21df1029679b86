"""The documentation site builds in strict mode: a broken link, a page missing from the
navigation or a docstring mkdocstrings cannot read fails the build, and so this test. The
README and the pages say what is true now, without history."""

from __future__ import annotations

import html
import importlib
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

import helix_dbos

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs").glob("*.md"))
REFERENCE_PAGES = sorted((ROOT / "docs" / "reference").glob("*.md"))  # one per public module
PRIVATE_NAME = re.compile(r"helix_dbos\._\w+|(?<![\w.*])_[a-z]\w*")  # a private module, or a _name


def _nav_files(items: list) -> list[str]:
    found: list[str] = []
    for item in items:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        found += _nav_files(value) if isinstance(value, list) else [value]
    return found


def test_the_site_builds_in_strict_mode(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=600, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stderr[-6000:]
    assert (tmp_path / "site" / "index.html").is_file()
    reference = [(tmp_path / "site" / "reference" / "index.html").read_text()] + [
        (tmp_path / "site" / "reference" / page.stem / "index.html").read_text() for page in REFERENCE_PAGES
    ]
    documented = {name for page in reference for name in re.findall(r'id="helix_dbos\.(?:[\w.]+\.)?(\w+)"', page)}
    assert set(helix_dbos.__all__) - {"admin"} - documented == set()  # every public name has its entry
    for page_file in REFERENCE_PAGES:  # a module's page has an entry for each name of its __all__
        if importlib.util.find_spec(f"helix_dbos.{page_file.stem}") is None:
            continue  # a page of names from helix_dbos itself
        module = importlib.import_module(f"helix_dbos.{page_file.stem}")
        page = (tmp_path / "site" / "reference" / page_file.stem / "index.html").read_text()
        entries = set(re.findall(r'id="helix_dbos\.[\w.]*?(\w+)"', page))
        assert set(getattr(module, "__all__", [])) - entries == set(), page_file.name
    for page in reference:
        assert ":class:" not in page and ":func:" not in page  # Sphinx roles read as names
        shown = _shown_text(page)
        assert PRIVATE_NAME.findall(shown) == []  # the reference shows no private name
        assert re.search(r"\bself\.\w", shown) is None  # nor the code that sets an attribute
        assert 'id="helix_dbos' in page


def _shown_text(page: str) -> str:
    """The text a reader sees of a page's article (no markup, no attribute)."""
    article = page[page.index("<article"):page.index("</article>")]
    return html.unescape(re.sub(r"<[^>]+>", " ", article))


def test_every_page_is_in_the_navigation() -> None:
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)  # no !!python tags
    pages = [p.name for p in PAGES] + [f"reference/{p.name}" for p in REFERENCE_PAGES]
    assert sorted(_nav_files(config["nav"])) == sorted(pages)


def test_the_readme_is_short() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 400


def test_the_docs_tell_no_history() -> None:
    """No commit hashes, seed documents, machine sizes, issue or migration numbers."""
    banned = re.compile(
        r"(?<![-\w])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}(?![-\w])"  # a commit hash
        r"|\bseed 0\d\d|\bseeds?/|-core machine|#\d{2,}\b|\bissue\b|_store/sql/\d|\bversions? [12]\d\b"
    )
    for page in [ROOT / "README.md", *PAGES, *REFERENCE_PAGES]:
        for number, line in enumerate(page.read_text().splitlines(), 1):
            assert not banned.search(line), f"{page.name}:{number}: {line}"


def test_the_readme_links_to_pages_that_exist() -> None:
    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\((?!https?://)([^)#]+)(?:#[^)]*)?\)", readme)
    assert links and all((ROOT / link).is_file() for link in links), [link for link in links if not (ROOT / link).is_file()]
    pages = {p.name for p in PAGES}
    linked_pages = {Path(link).name for link in links if link.startswith("docs/") and link.endswith(".md")}
    assert linked_pages == pages - {"index.md"}  # every page but the home page
