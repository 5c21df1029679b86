"""Publishing token deltas with ``pg_notify`` on a per-session channel, and listening to it.

Deltas are never stored: each is one NOTIFY on :func:`delta_channel` of its session, sent
by a background thread over its own connection, so the model call only appends to a
queue. Publishing is best-effort: a failure is logged and the delta dropped, and the
thread reconnects for the next one::

    publisher = DeltaPublisher(url)
    publisher.publish("s1", record)      # returns at once
    publisher.flush(timeout=1.0)         # wait until what was queued is sent

A reader LISTENs on the same channel (``LISTEN "<delta_channel(session_id)>"``).
"""

from __future__ import annotations

import hashlib
import logging
import queue
import threading
from dataclasses import dataclass

import psycopg
from psycopg import sql

from helix_dbos.database import libpq_url
from helix_dbos.deltas import DeltaRecord, split_to_fit

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


@dataclass(frozen=True)
class _Note:
    """One NOTIFY to send, or (with ``done``) a marker set when all before it were sent."""

    channel: str = ""
    payload: str = ""
    done: threading.Event | None = None


class DeltaPublisher:
    """Sends deltas in the order published, from one daemon thread started on first use."""

    def __init__(self, database_url: str) -> None:
        self._url = libpq_url(database_url)
        self._queue: queue.Queue[_Note] = queue.Queue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def publish(self, session_id: str, record: DeltaRecord) -> int:
        """Queue ``record`` (split to fit a NOTIFY payload); returns how many payloads."""
        parts = split_to_fit(record)
        channel = delta_channel(session_id)
        for number, part in enumerate(parts):
            self._queue.put(_Note(channel, part.model_copy(update={"index": record.index + number}).to_payload()))
        self._start()
        return len(parts)

    def flush(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the queue to be sent; True if it was."""
        done = threading.Event()
        self._queue.put(_Note(done=done))
        self._start()
        return done.wait(timeout)

    def _start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._send_forever, name="helix-deltas", daemon=True)
                self._thread.start()

    def _send_forever(self) -> None:
        conn: psycopg.Connection | None = None
        while True:
            note = self._queue.get()
            if note.done is not None:
                note.done.set()
                continue
            try:
                if conn is None or conn.closed:
                    conn = psycopg.connect(self._url, autocommit=True, connect_timeout=5)
                conn.execute("SELECT pg_notify(%s, %s)", (note.channel, note.payload))
            except psycopg.Error as error:
                logger.warning("could not publish a token delta (dropped): %s", error)
                conn = None
