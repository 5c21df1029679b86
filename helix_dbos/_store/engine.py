"""SQLAlchemy engines on psycopg 3 for reading and writing the ``helix`` schema, and the
same statements for psycopg's own (async) connections.

    >>> engine = create_engine("postgresql://postgres@127.0.0.1:5432/app")   # doctest: +SKIP
"""

from __future__ import annotations

import functools
import json
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import psycopg as psycopg_dialect
from sqlalchemy.engine import make_url

_DIALECT = psycopg_dialect.dialect()  # type: ignore[no-untyped-call]  # SQLAlchemy leaves its __init__ unannotated


def sqlalchemy_url(url: str) -> str:
    """The URL with the psycopg 3 driver that DBOS uses too."""
    return make_url(url).set(drivername="postgresql+psycopg").render_as_string(hide_password=False)


def create_engine(url: str, **kwargs: Any) -> sa.Engine:
    """An engine for ``url`` (pool_pre_ping on, so a restarted server is survived)."""
    return sa.create_engine(sqlalchemy_url(url), pool_pre_ping=True, **kwargs)


def create_statement_engine(url: str) -> sa.Engine:
    """An engine for single statements that commit on their own and that the caller runs
    again on a connection fault (``store.retry.retry_transient``): autocommit, and no
    ping before each use (a dead connection fails the statement, SQLAlchemy discards it,
    and the retry takes a new one). One round trip per statement, where an engine with
    ``pool_pre_ping`` and a transaction takes four."""
    return sa.create_engine(sqlalchemy_url(url), isolation_level="AUTOCOMMIT", pool_size=20, max_overflow=20)


def to_json(value: Any) -> str:
    """Compact JSON for a ``CAST(:x AS jsonb)`` parameter."""
    return json.dumps(value, separators=(",", ":"), allow_nan=False)


@functools.lru_cache(maxsize=1024)
def psycopg_sql(text: str) -> str:
    """SQL written for SQLAlchemy's ``text()`` (``:name`` parameters) with psycopg's
    ``%(name)s`` placeholders, compiled once per statement.

    >>> psycopg_sql("SELECT 1 WHERE id = :id AND x LIKE 'a%'")
    "SELECT 1 WHERE id = %(id)s AND x LIKE 'a%%'"
    """
    return str(sa.text(text).compile(dialect=_DIALECT))
