"""One helper gives the first line of an error, and nothing else in the package takes
the first line of a message by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

import helix_dbos
from helix_dbos._cli.main import move
from helix_dbos._client.queues import DEFAULT_QUEUE
from helix_dbos._error_text import first_line

PACKAGE = Path(helix_dbos.__file__).resolve().parent


@pytest.mark.parametrize(("message", "expected"), [
    ("bad value\n  detail", "bad value"),
    ("", "ValueError"),
    ("   \n\t\n", "ValueError"),
    ("\n\n  second line first  \nthird", "second line first"),
])
def test_first_line_is_the_first_non_blank_line_or_the_type(message: str, expected: str) -> None:
    assert first_line(ValueError(message)) == expected


def test_no_module_takes_a_first_line_by_hand() -> None:
    by_hand = [str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py")
               if "splitlines()[0]" in path.read_text() and path.name != "_error_text.py"]
    assert by_hand == []


def test_move_defaults_to_the_executors_default_queue() -> None:
    [queue] = [param for param in move.params if param.name == "queue"]
    assert queue.default == DEFAULT_QUEUE
