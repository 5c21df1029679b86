"""Which toolset (MCP server) each tool a run listed came from, in ``helix.toolset_tools``.

A run's listing step records the names the model calls its toolsets' tools by; operators'
reads turn them into a map from tool name to server, so ``helix-dbos show`` and the
console say ``files_read (MCP server files)``::

    record_toolset_tools(conn, "s1", 1, "files", ["files_read", "files_list"])
    tool_servers(conn, "s1")          # {"files_read": "files", "files_list": "files"}
"""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection, Connection

from helix_dbos._store.reads import session_num
from helix_dbos._store.statements import all_rows, all_rows_async

_RECORD = (
    f"INSERT INTO helix.toolset_tools (session_num, run, tool_name, toolset)"
    f" SELECT {session_num()}, %(run)s, name, %(toolset)s FROM unnest(CAST(%(names)s AS text[])) AS name"
    " ON CONFLICT DO NOTHING"
)
_READ = f"SELECT tool_name, toolset FROM helix.toolset_tools WHERE session_num = {session_num()} ORDER BY run"


def record_toolset_tools(conn: Connection[Any], session_id: str, run: int, toolset: str, names: list[str]) -> None:
    """Record that ``names`` (as the model calls them) are tools of ``toolset`` in the run."""
    if names:
        conn.execute(_RECORD, {"id": session_id, "run": run, "toolset": toolset, "names": names})


def tool_servers(conn: Connection[Any], session_id: str) -> dict[str, str]:
    """The toolset of each tool name the session's runs listed (a later run's wins)."""
    return {row["tool_name"]: row["toolset"] for row in all_rows(conn, _READ, {"id": session_id})}


async def tool_servers_async(conn: AsyncConnection[Any], session_id: str) -> dict[str, str]:
    """:func:`tool_servers` over an async connection."""
    return {row["tool_name"]: row["toolset"] for row in await all_rows_async(conn, _READ, {"id": session_id})}
