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

A running tool's live state goes through :meth:`DeltaPublisher.publish_state`: its
patches wait :data:`LIVE_STATE_DELAY` seconds, joined by what the same call adds
meanwhile, and go as one delta; ``discard_state`` drops them when the tool returned
before that (its step's ``state_patch`` event says the same). A tool that runs for
seconds shows each of its updates within that delay, a quick one costs no NOTIFY.

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
LIVE_STATE_DELAY = 0.025
"""Seconds a tool's live state patches wait, joined, before they are sent."""
_KNOWN_SESSIONS = 10_000
"""Sessions whose ancestors the publisher remembers (the least recently used are forgotten)."""


@dataclass(frozen=True)
class _Note:
    """Deltas to send for a session, each fitting a NOTIFY payload but a joined state delta
    (split when sent)."""

    session_id: str
    records: tuple[DeltaRecord, ...]

    def payloads(self) -> list[str]:
        return [
            part.model_copy(update={"index": record.index + number}).to_payload()
            for record in self.records
            for number, part in enumerate(split_to_fit(record))
        ]


class DeltaPublisher(Sender[_Note]):
    """Sends deltas in the order published, from one daemon thread started on first use."""

    def __init__(self, database_url: str) -> None:
        super().__init__(database_url, name="helix-deltas")
        self._channels: OrderedDict[str, list[str]] = OrderedDict()
        """Session id -> the delta channels of the session and its ancestors (sender thread only)."""

    def publish(self, record: DeltaRecord) -> int:
        """Queue ``record`` (split to fit a NOTIFY payload); returns how many payloads."""
        parts = split_to_fit(record)
        numbered = tuple(part.model_copy(update={"index": record.index + n}) for n, part in enumerate(parts))
        if numbered:
            self.put(_Note(record.session_id, numbered))
        return len(parts)

    def publish_state(self, record: DeltaRecord) -> None:
        """Hold a running tool's ``state`` delta for :data:`LIVE_STATE_DELAY` seconds,
        joined with the call's next ones."""
        self.hold(_state_key(record), _Note(record.session_id, (record,)), LIVE_STATE_DELAY)

    def discard_state(self, record: DeltaRecord) -> None:
        """Drop what is held of the call (and attempt) of ``record``, unsent."""
        self.discard(_state_key(record))

    def merge(self, held: _Note, item: _Note) -> _Note:
        first, new = held.records[0], item.records[0]
        return _Note(held.session_id, (first.model_copy(update={"patch": [*(first.patch or []), *(new.patch or [])]}),))

    def send(self, conn: psycopg.Connection, items: list[_Note]) -> None:
        for note in items:
            channels = self._channels_of(conn, note.session_id)
            for payload in note.payloads():
                conn.execute(_NOTIFY_ALL, (payload, channels))

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


def _state_key(record: DeltaRecord) -> tuple[str, int, int, str | None, int]:
    """Which call and attempt a ``state`` delta is of."""
    return (record.session_id, record.run, record.step, record.tool_call_id, record.attempt)
