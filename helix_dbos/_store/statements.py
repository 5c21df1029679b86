"""Running the store's SQL on psycopg 3 connections, sync and async side by side.

Every statement of the ``helix`` schema is a plain string with psycopg's named
placeholders (``%(id)s``), run by one of these with a dict of parameters; a row comes
back as a dict, the same on both sides, so a read and its ``_async`` twin share the
statement and the row mapping::

    >>> with pool.connection() as conn:                                    # doctest: +SKIP
    ...     row = first_row(conn, "SELECT status FROM helix.sessions WHERE id = %(id)s", {"id": "s1"})
    >>> async with async_pool.connection() as conn:                        # doctest: +SKIP
    ...     row = await first_row_async(conn, "SELECT ...", {"id": "s1"})

The connections come from :mod:`helix_dbos._store.pools` (autocommit; a transaction is
``with conn.transaction():``) or, inside a DBOS datasource transaction, from
:func:`helix_dbos._store.pools.transaction_connection`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from psycopg import AsyncConnection, Connection
from psycopg.rows import dict_row

Params = Mapping[str, Any]


def to_json(value: Any) -> str:
    """Compact JSON for a ``CAST(%(x)s AS jsonb)`` parameter."""
    return json.dumps(value, separators=(",", ":"), allow_nan=False)


def all_rows(conn: Connection[Any], sql: str, params: Params | None = None) -> list[dict[str, Any]]:
    """The rows of ``sql``, each a dict by column name."""
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(sql, params)
        return cur.fetchall()


def first_row(conn: Connection[Any], sql: str, params: Params | None = None) -> dict[str, Any] | None:
    """The first row of ``sql`` as a dict, or None when there is none."""
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(sql, params)
        return cur.fetchone()


def first_value(conn: Connection[Any], sql: str, params: Params | None = None) -> Any:
    """The first column of the first row of ``sql`` (None when there is no row)."""
    with conn.cursor() as cur:
        cur.execute(sql, params)
        row = cur.fetchone()
        return row[0] if row is not None else None


def execute(conn: Connection[Any], sql: str, params: Params | None = None) -> int:
    """Run ``sql``; the number of rows it wrote or returned."""
    with conn.cursor() as cur:
        cur.execute(sql, params)
        return cur.rowcount


async def all_rows_async(conn: AsyncConnection[Any], sql: str, params: Params | None = None) -> list[dict[str, Any]]:
    """:func:`all_rows` on an async connection."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(sql, params)
        return await cur.fetchall()


async def first_row_async(
    conn: AsyncConnection[Any], sql: str, params: Params | None = None
) -> dict[str, Any] | None:
    """:func:`first_row` on an async connection."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(sql, params)
        return await cur.fetchone()


async def first_value_async(conn: AsyncConnection[Any], sql: str, params: Params | None = None) -> Any:
    """:func:`first_value` on an async connection."""
    async with conn.cursor() as cur:
        await cur.execute(sql, params)
        row = await cur.fetchone()
        return row[0] if row is not None else None


async def execute_async(conn: AsyncConnection[Any], sql: str, params: Params | None = None) -> int:
    """:func:`execute` on an async connection."""
    async with conn.cursor() as cur:
        await cur.execute(sql, params)
        return cur.rowcount
