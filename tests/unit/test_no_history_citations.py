"""The source says what the code does, not where it came from: no module, docstring or
comment of helix_dbos cites a migration number, a spec document ("seed 004"), an issue
number, a commit hash or "the release before". History goes to CHANGELOG.md and git."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "helix_dbos"

CITATION = re.compile(
    r"\bmigrations? \d{2,}"  # migration 014
    r"|\bseeds? \d{3}"  # seed 004, seeds 000
    r"|\bseed documents?\b|\bthe seeds?'?s?\b"  # the seed's priority order
    r"|(?<![&\w])#\d{2,}\b"  # #33
    r"|\bissues? #?\d+"  # issue 35
    r"|\bcommits? [0-9a-f]{7,40}\b"  # commit 1a6c9bb
    r"|(?<!['\"\w])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,10}\b(?!['\"])"  # (f8f3a96, ...)
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
    ],
)
def test_text_that_cites_nothing_passes(line: str) -> None:
    assert citations(line) == []


def test_no_source_file_of_helix_dbos_cites_history() -> None:
    files = sorted([*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.sql")])
    found = {str(path.relative_to(PACKAGE.parent)): hits for path in files if (hits := citations(path.read_text()))}
    assert len(files) > 50
    assert found == {}
