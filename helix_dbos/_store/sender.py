"""One daemon thread that sends a process's queued items to Postgres, in order, over an
autocommit connection of its own: what the token-delta publisher and the live event
writer share. The caller only appends to a queue; ``flush`` waits until what was queued
before it is sent. A batch that fails is tried again on a new connection for up to
``retry_seconds`` (so a moment without a free connection does not reorder what is sent),
then dropped (the subclass says what that means)::

    class Notifier(Sender[str]):
        def send(self, conn, items):
            for item in items:
                conn.execute("SELECT pg_notify('c', %s)", (item,))

    notifier = Notifier(url, name="helix-notify")
    notifier.put("hello")                 # returns at once
    notifier.flush(timeout=1.0)           # True once "hello" is sent
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Generic, TypeVar

import psycopg

from helix_dbos._database import libpq_url

T = TypeVar("T")


class _Flush:
    """A marker in the queue, set once everything before it was sent (or dropped)."""

    def __init__(self) -> None:
        self.done = threading.Event()


class Sender(Generic[T]):
    """Sends items in the order put, in batches of what queued up meanwhile."""

    retry_seconds = 0.0
    """How long a failed batch is tried again before it is dropped."""

    def __init__(self, database_url: str, name: str) -> None:
        self._url = libpq_url(database_url)
        self._name = name
        self._queue: queue.Queue[T | _Flush] = queue.Queue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def send(self, conn: psycopg.Connection, items: list[T]) -> None:
        """Send ``items`` (in order) on ``conn``; a ``psycopg.Error`` drops them."""
        raise NotImplementedError

    def dropped(self, items: list[T], error: psycopg.Error) -> None:
        """Told when ``items`` could not be sent."""

    def put(self, item: T) -> None:
        self._queue.put(item)
        self._start()

    def flush(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds until everything put before is sent; True if it was."""
        marker = _Flush()
        self.put(marker)  # type: ignore[arg-type]
        return marker.done.wait(timeout)

    def _start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._send_forever, name=self._name, daemon=True)
                self._thread.start()

    def _send_forever(self) -> None:
        conn: psycopg.Connection | None = None
        while True:
            batch: list[T] = []
            for item in self._take_all():
                if not isinstance(item, _Flush):
                    batch.append(item)
                    continue
                conn = self._send_batch(conn, batch)
                batch = []
                item.done.set()
            conn = self._send_batch(conn, batch)

    def _send_batch(self, conn: psycopg.Connection | None, batch: list[T]) -> psycopg.Connection | None:
        """Send ``batch``; the connection to use next (None after a failure)."""
        if not batch:
            return conn
        deadline = time.monotonic() + self.retry_seconds
        pause = 0.02
        while True:
            try:
                if conn is None or conn.closed:
                    conn = psycopg.connect(self._url, autocommit=True, connect_timeout=5)
                self.send(conn, batch)
                return conn
            except psycopg.Error as error:
                if conn is not None and not conn.closed:
                    conn.close()
                conn = None
                if time.monotonic() + pause > deadline:
                    self.dropped(batch, error)
                    return None
                time.sleep(pause)
                pause = min(pause * 2, 0.5)

    def _take_all(self) -> list[T | _Flush]:
        """The next item (waiting for one) and every item queued behind it."""
        taken = [self._queue.get()]
        while True:
            try:
                taken.append(self._queue.get_nowait())
            except queue.Empty:
                return taken
