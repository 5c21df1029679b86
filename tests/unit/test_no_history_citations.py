"""The source and the docs say what is true now, not where it came from: no module,
docstring or comment of helix_dbos, no page of docs/ and not the README cites a migration
number, a design document ("seed 004", a path outside the repository), an issue number, a
commit hash or "the release before". History goes to CHANGELOG.md and git."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "helix_dbos"

CITATION = re.compile(
    r"\bmigrations? \d{2,}"  # migration 014
    r"|\bseeds? \d{3}"  # seed 004, seeds 000
    r"|\bseed documents?\b|\bthe seeds?'?s?\b"  # the seed's priority order
    r"|\bseeds?/|\bDESIGN\.md\b"  # design documents outside the repository
    r"|\bschema version \d+"  # schema version 22
    r"|(?<![&\w])#\d{2,}\b"  # #33
    r"|\bissues? #?\d+"  # issue 35
    r"|\bcommits? [0-9a-f]{7,40}\b"  # commit 1a6c9bb
    r"|(?<!['\"\w-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,10}\b(?!['\"-])"  # (f8f3a96, ...), not a UUID
    r"|\bthe release before\b",
    re.IGNORECASE,
)


def citations(text: str) -> list[str]:
    """The lines of ``text`` that cite history, as ``<line>: <text>``."""
    return [f"{n}: {line.strip()}" for n, line in enumerate(text.splitlines(), 1) if CITATION.search(line)]


@pytest.mark.parametrize(
    "line",
    [
        "The agent server (seed 004): your agents over HTTP.",
        "in seeds 000 and 001",
        "checked in the seed's priority order",
        "a column added by migration 014",
        "Events reach the stream when they happen (issue 15).",
        "fixed in #33",
        "measured at commit 1a6c9bb",
        "per-commit tables (f8f3a96, 1a6c9bb, ...)",
        "as the release before did",
        "The agent semantics are in `../shared/seeds/`.",
        "once no worker of schema version 22 replays",
        "the layers in DESIGN.md",
    ],
)
def test_a_citation_of_history_is_found(line: str) -> None:
    assert citations(line) == [f"1: {line}"]


@pytest.mark.parametrize(
    "line",
    [
        "helix-dbos migrate applies the migrations in order",
        "'helix_deltas_e8bc163c82eee18733288c7d'",
        "'e8bc163c82eee18733288c7d4ac636db'",
        "rng = random.Random(seed)",
        "the release lease is announced",
        "&#34;town&#34;",
        "helix-dbos show 01a216a2-ef0b-772d-84b1-fa90b86ceb7f",
    ],
)
def test_text_that_cites_nothing_passes(line: str) -> None:
    assert citations(line) == []


def test_no_source_file_of_helix_dbos_cites_history() -> None:
    files = sorted([*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.sql")])
    found = {str(path.relative_to(PACKAGE.parent)): hits for path in files if (hits := citations(path.read_text()))}
    assert len(files) > 50
    assert found == {}


def test_no_page_of_the_docs_cites_history() -> None:
    pages = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
    found = {str(path.relative_to(ROOT)): hits for path in pages if (hits := citations(path.read_text()))}
    assert len(pages) > 20
    assert found == {}
