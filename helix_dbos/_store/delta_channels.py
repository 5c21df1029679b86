"""Publishing token deltas with ``pg_notify`` on per-session channels, and listening to them.

Deltas are never stored: each is a NOTIFY on :func:`delta_channel` of its session and of
every session above it (a sub-agent's deltas reach its parent's and its root's consumers,
tagged with the sub-agent's ``session_id``), sent in one statement by a background thread
over its own connection (``_store/sender.py``), so the model call only appends to a queue. The thread reads a
session's ancestors once (they never change: a parent claims its child when it creates
it). Publishing is best-effort: a failure is logged and the delta dropped, and the thread
reconnects for the next one::

    publisher = DeltaPublisher(url)
    publisher.publish(record)            # returns at once
    publisher.flush(timeout=1.0)         # wait until what was queued is sent

A reader LISTENs on its session's channel (``LISTEN "<delta_channel(session_id)>"``).
"""

from __future__ import annotations

import hashlib
import logging
from collections import OrderedDict
from dataclasses import dataclass

import psycopg
from psycopg import sql

from helix_dbos._deltas import DeltaRecord, split_to_fit
from helix_dbos._store.sender import Sender

logger = logging.getLogger("helix_dbos.deltas")


def delta_channel(session_id: str) -> str:
    """The NOTIFY channel of a session's deltas: a hash, so any session id makes a valid,
    short identifier.

    >>> delta_channel("s1")
    'helix_deltas_e8bc163c82eee18733288c7d'
    """
    return "helix_deltas_" + hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def listen_statement(session_id: str) -> sql.Composed:
    """``LISTEN`` on the session's delta channel."""
    return sql.SQL("LISTEN {}").format(sql.Identifier(delta_channel(session_id)))


_ANCESTORS = """
WITH RECURSIVE up(num, depth) AS (
    SELECT parent_session_num, 1 FROM helix.sessions WHERE id = %s AND parent_session_num IS NOT NULL
    UNION ALL
    SELECT s.parent_session_num, up.depth + 1 FROM helix.sessions s JOIN up ON s.num = up.num
     WHERE s.parent_session_num IS NOT NULL AND up.depth < 100
)
SELECT s.id FROM up JOIN helix.sessions s ON s.num = up.num ORDER BY up.depth
"""
_NOTIFY_ALL = "SELECT pg_notify(channel, %s) FROM unnest(%s::text[]) AS channel"
_KNOWN_SESSIONS = 10_000
"""Sessions whose ancestors the publisher remembers (the least recently used are forgotten)."""


@dataclass(frozen=True)
class _Note:
    """One delta payload to send for a session."""

    session_id: str
    payload: str


class DeltaPublisher(Sender[_Note]):
    """Sends deltas in the order published, from one daemon thread started on first use."""

    def __init__(self, database_url: str) -> None:
        super().__init__(database_url, name="helix-deltas")
        self._channels: OrderedDict[str, list[str]] = OrderedDict()
        """Session id -> the delta channels of the session and its ancestors (sender thread only)."""

    def publish(self, record: DeltaRecord) -> int:
        """Queue ``record`` (split to fit a NOTIFY payload); returns how many payloads."""
        parts = split_to_fit(record)
        for number, part in enumerate(parts):
            self.put(_Note(record.session_id, part.model_copy(update={"index": record.index + number}).to_payload()))
        return len(parts)

    def send(self, conn: psycopg.Connection, items: list[_Note]) -> None:
        for note in items:
            conn.execute(_NOTIFY_ALL, (note.payload, self._channels_of(conn, note.session_id)))

    def dropped(self, items: list[_Note], error: psycopg.Error) -> None:
        logger.warning("could not publish %d token deltas (dropped): %s", len(items), error)

    def _channels_of(self, conn: psycopg.Connection, session_id: str) -> list[str]:
        """The delta channels of ``session_id`` and of the sessions above it, nearest first."""
        channels = self._channels.get(session_id)
        if channels is None:
            ancestors = [row[0] for row in conn.execute(_ANCESTORS, (session_id,))]
            channels = [delta_channel(sid) for sid in [session_id, *ancestors]]
            self._channels[session_id] = channels
            if len(self._channels) > _KNOWN_SESSIONS:
                self._channels.popitem(last=False)
        self._channels.move_to_end(session_id)
        return channels
