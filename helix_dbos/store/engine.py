"""SQLAlchemy engines on psycopg 3 for reading and writing the ``helix`` schema.

    >>> engine = create_engine("postgresql://postgres@127.0.0.1:5432/app")   # doctest: +SKIP
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import make_url


def sqlalchemy_url(url: str) -> str:
    """The URL with the psycopg 3 driver that DBOS uses too."""
    return make_url(url).set(drivername="postgresql+psycopg").render_as_string(hide_password=False)


def create_engine(url: str, **kwargs: Any) -> sa.Engine:
    """An engine for ``url`` (pool_pre_ping on, so a restarted server is survived)."""
    return sa.create_engine(sqlalchemy_url(url), pool_pre_ping=True, **kwargs)


def to_json(value: Any) -> str:
    """Compact JSON for a ``CAST(:x AS jsonb)`` parameter."""
    return json.dumps(value, separators=(",", ":"), allow_nan=False)
