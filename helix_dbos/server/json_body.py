"""Request bodies as JSON, with a bound on nesting: every route that takes JSON reads its
body with :func:`read_json` (a console form's JSON field goes through :func:`parse_json`).
A body nested deeper than :data:`MAX_JSON_DEPTH` levels is answered with 422 before it is
parsed::

    {"error": "too_deeply_nested", "message": "the JSON is nested deeper than 64 levels", "max_depth": 64}

The depth is measured on the raw bytes (brackets outside strings), and only for a body
with more brackets than the limit, so an ordinary body costs two byte counts.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from helix_dbos.server.problems import problem

MAX_JSON_DEPTH = 64
"""The deepest nesting of arrays and objects a request body may have."""

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"?', re.DOTALL)
"""A JSON string (an unterminated one runs to the end: one pass, never a second try)."""
_NOT_BRACKET = re.compile(rb"[^\[\]{}]+")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


class TooDeeplyNested(ValueError):
    """JSON text nests arrays and objects deeper than :data:`MAX_JSON_DEPTH` (a request
    body with it is answered with 422)."""


async def read_json(request: Request) -> Any:
    """The request's body parsed as JSON, or None when it is not JSON (the route's model
    then says what is missing). Raises :class:`TooDeeplyNested` for a body nested deeper
    than :data:`MAX_JSON_DEPTH`, which ``create_app`` answers with 422."""
    try:
        return parse_json(await request.body())
    except TooDeeplyNested:
        raise
    except ValueError:
        return None


def parse_json(text: bytes | str) -> Any:
    """``json.loads(text)``, after checking its nesting: raises :class:`TooDeeplyNested`
    beyond :data:`MAX_JSON_DEPTH` levels (where ``json.loads`` would recurse until a
    ``RecursionError``), and ``json.JSONDecodeError`` for text that is not JSON."""
    raw = text.encode() if isinstance(text, str) else text
    if nesting_exceeds(raw, MAX_JSON_DEPTH):
        raise TooDeeplyNested(f"the JSON is nested deeper than {MAX_JSON_DEPTH} levels")
    return json.loads(raw)


def nesting_exceeds(body: bytes, limit: int) -> bool:
    """Whether the arrays and objects of ``body`` (JSON text) nest deeper than ``limit``::

        >>> nesting_exceeds(b'[[1], {"a": "[[[["}]', 2)
        False
        >>> nesting_exceeds(b'[[[1]]]', 2)
        True
    """
    if body.count(b"[") + body.count(b"{") <= limit:
        return False
    brackets = _NOT_BRACKET.sub(b"", _STRING.sub(b"", body))
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0) > limit


async def on_too_deeply_nested(request: Request, exc: Exception) -> JSONResponse:
    return problem(422, "too_deeply_nested", str(exc), max_depth=MAX_JSON_DEPTH)
