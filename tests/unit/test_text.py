"""The rule for text Postgres cannot store (helix_dbos/_text.py): what counts as
unstorable, where it is found, how a run's own text is made storable, and how caller
text is refused."""

from __future__ import annotations

import doctest
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import helix_dbos
from helix_dbos import _text as text
from helix_dbos.errors import HelixError, UnstorableTextError
from helix_dbos._text import REPLACEMENT, Unstorable, find_unstorable, require_storable, storable

# Any code point, surrogates and NUL included, so the strategies reach every case.
chars = st.characters(codec=None, exclude_categories=())
strings = st.text(alphabet=chars, max_size=12)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | strings,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(strings, inner, max_size=4),
    max_leaves=20,
)


def test_the_docstring_examples_hold() -> None:
    results = doctest.testmod(text)
    assert results.attempted > 0 and results.failed == 0


@pytest.mark.parametrize("bad", ["\x00", "\ud800", "\udbff", "\udc00", "\udfff"])
def test_nul_and_every_kind_of_lone_surrogate_is_unstorable(bad: str) -> None:
    assert find_unstorable(f"ab{bad}c") == Unstorable("", 2, bad, False)
    assert storable(f"ab{bad}c") == f"ab{REPLACEMENT}c"


@pytest.mark.parametrize("fine", ["", "plain", "\x01\x1f\x7f", "é 中 😀", "\ufffd", "\uffff", "\U0010ffff", "\\u0000"])
def test_other_text_is_storable_and_left_alone(fine: str) -> None:
    assert find_unstorable(fine) is None
    assert storable(fine) is fine


def test_the_path_names_keys_indexes_and_keys_themselves() -> None:
    value = {"ok": [1, "x"], "items": [{"name": "fine"}, {"name": "ba\x00d"}]}
    assert find_unstorable(value) == Unstorable("items[1].name", 2, "\x00", False)
    assert find_unstorable([["a", "\ud801"]]) == Unstorable("[0][1]", 0, "\ud801", False)
    assert find_unstorable({"outer": {"k\x00ey": 1}}) == Unstorable("outer", 1, "\x00", True)


def test_storable_replaces_deep_including_dict_keys() -> None:
    value = {"a\x00": ["ok", ("t\ud800", 3)], "n": None, "f": 1.5}
    assert storable(value) == {"a\ufffd": ["ok", ["t\ufffd", 3]], "n": None, "f": 1.5}
    assert value == {"a\x00": ["ok", ("t\ud800", 3)], "n": None, "f": 1.5}  # the input is not changed


def test_storable_returns_the_same_object_when_nothing_needs_replacing() -> None:
    value: dict[str, Any] = {"a": [1, {"b": "c"}], "d": "é"}
    assert storable(value) is value


def test_a_container_whose_text_only_spells_nul_is_left_alone() -> None:
    """A container is first looked at as JSON, where a NUL is written ``\\u0000``: text
    that spells it is then walked, and still left as it is."""
    value = {"k": "\\u0000", "l": ["\\\\u0000", "\\ud800"]}
    assert storable(value) is value


def test_values_json_cannot_write_are_walked_and_kept() -> None:
    thing = object()
    assert storable({"o": thing, "s": "a\x00"}) == {"o": thing, "s": "a\ufffd"}
    assert storable({(1, 2): ["x\ud800"]}) == {(1, 2): ["x\ufffd"]}
    fine = {(1, 2): "x", "o": thing}
    assert storable(fine) is fine


def test_require_storable_names_the_field_path_and_position() -> None:
    with pytest.raises(UnstorableTextError) as caught:
        require_storable("result", {"rows": ["fine", "bro\ud83dken"]})
    error = caught.value
    assert (error.field, error.path, error.position) == ("result", "rows[1]", 3)
    assert "result.rows[1] has a lone surrogate (U+D83D) at position 3" in str(error)
    with pytest.raises(UnstorableTextError, match=r"a key of answer has NUL \(U\+0000\) at position 0"):
        require_storable("answer", {"\x00": 1})
    require_storable("input", "all fine")  # no error


def test_the_error_is_a_public_helix_error() -> None:
    assert helix_dbos.UnstorableTextError is UnstorableTextError
    assert issubclass(UnstorableTextError, HelixError)


@given(json_values)
def test_storable_output_is_always_storable_and_encodes_as_utf8(value: Any) -> None:
    clean = storable(value)
    assert find_unstorable(clean) is None
    json.dumps(clean, ensure_ascii=False).encode("utf-8")  # raises on a surrogate


@given(json_values)
def test_storable_changes_exactly_the_values_find_unstorable_reports(value: Any) -> None:
    assert (storable(value) is value) == (find_unstorable(value) is None)


@given(strings)
def test_storable_keeps_length_and_every_storable_character(value: str) -> None:
    clean = storable(value)
    assert len(clean) == len(value)
    for before, after in zip(value, clean):
        assert after == (REPLACEMENT if before == "\x00" or 0xD800 <= ord(before) <= 0xDFFF else before)


@given(json_values)
def test_storable_is_idempotent(value: Any) -> None:
    once = storable(value)
    assert storable(once) is once
