"""The nesting bound of JSON request bodies (helix_dbos/server/json_body.py): the depth
measured on the raw bytes agrees with the parsed value's for any JSON, brackets inside
strings do not count, and text too deep to parse is refused before ``json.loads``."""

from __future__ import annotations

import doctest
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from helix_dbos.server import json_body
from helix_dbos.server.json_body import MAX_JSON_DEPTH, TooDeeplyNested, nesting_exceeds, parse_json

# Strings full of what the scanner must skip: brackets, quotes and backslashes.
strings = st.text(alphabet=st.sampled_from('[]{}"\\ab\u00e9\n'), max_size=8)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | strings,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(strings, inner, max_size=3),
    max_leaves=30,
)


def depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((depth(v) for v in value.values()), default=0)
    return 0


def test_the_docstring_examples_hold() -> None:
    results = doctest.testmod(json_body)
    assert results.attempted > 0 and results.failed == 0


@given(json_values, st.integers(min_value=0, max_value=8), st.booleans())
def test_the_depth_on_the_bytes_is_the_depth_of_the_value(value: Any, limit: int, ascii_only: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only).encode()
    assert nesting_exceeds(text, limit) == (depth(value) > limit)


def test_a_body_at_the_limit_parses_and_one_level_more_is_refused() -> None:
    at_limit = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert depth(parse_json(at_limit)) == MAX_JSON_DEPTH
    with pytest.raises(TooDeeplyNested, match=f"nested deeper than {MAX_JSON_DEPTH} levels"):
        parse_json("[" + at_limit + "]")


def test_two_hundred_thousand_levels_are_refused_without_a_recursion_error() -> None:
    with pytest.raises(TooDeeplyNested):
        parse_json(b'{"a": ' * 200_000 + b"1" + b"}" * 200_000)


def test_text_that_is_not_json_is_a_decode_error() -> None:
    with pytest.raises(json.JSONDecodeError):
        parse_json("{city: Paris")


def test_brackets_in_strings_escaped_quotes_and_an_unterminated_string_do_not_count() -> None:
    assert not nesting_exceeds(b'["' + b"[" * 100 + b'"]', 2)
    assert not nesting_exceeds(b'["\\\"' + b"{" * 100 + b'"]', 2)
    assert not nesting_exceeds(b'["' + b"[" * 100, 2)
    assert nesting_exceeds(b'["\\\\"' + b"[" * 3, 2)
