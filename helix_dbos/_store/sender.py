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

An item may also be *held* under a key for a while before it is sent: what is held under
the same key meanwhile joins it (``merge``), and ``discard(key)`` drops it unsent. That is
how something that may soon be made moot (a step's live events, which its commit writes
anyway; a quick tool's live state) costs nothing when it is, and is sent once otherwise::

    notifier.hold(("s1", 1), "a", seconds=0.025)
    notifier.hold(("s1", 1), "b", seconds=0.025)   # merge("a", "b"), sent 25 ms after "a"
    notifier.discard(("s1", 1))                    # or never sent: False

``discard`` says whether something held under the key was taken to be sent since the key
was last discarded (then it may be in the database already). ``flush`` sends what is held
first.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

import psycopg

from helix_dbos._database import libpq_url

T = TypeVar("T")


class _Flush:
    """A marker in the queue, set once everything before it was sent (or dropped)."""

    def __init__(self) -> None:
        self.done = threading.Event()


@dataclass
class _Held(Generic[T]):
    """An item held until ``due`` (``time.monotonic()``)."""

    item: T
    due: float


class _Wake:
    """A marker in the queue: something held may be due earlier than the thread thought."""


class Sender(Generic[T]):
    """Sends items in the order put, in batches of what queued up meanwhile."""

    retry_seconds = 0.0
    """How long a failed batch is tried again before it is dropped."""

    remembered_keys = 4096
    """How many keys whose held items were taken to be sent ``discard`` remembers; past
    that, it forgets the oldest (a key that is never discarded is not kept forever)."""

    def __init__(self, database_url: str, name: str) -> None:
        self._url = libpq_url(database_url)
        self._name = name
        self._queue: queue.Queue[T | _Flush | _Wake] = queue.Queue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._held: dict[Hashable, _Held[T]] = {}
        """Held items by key, in the order they were first held (guarded by ``_lock``)."""
        self._taken: dict[Hashable, None] = {}
        """Keys whose held items were taken to be sent, oldest first (guarded by ``_lock``)."""

    def send(self, conn: psycopg.Connection, items: list[T]) -> None:
        """Send ``items`` (in order) on ``conn``; a ``psycopg.Error`` drops them."""
        raise NotImplementedError

    def dropped(self, items: list[T], error: psycopg.Error) -> None:
        """Told when ``items`` could not be sent."""

    def merge(self, held: T, item: T) -> T:
        """``held`` and ``item``, held under the same key, as one item."""
        raise NotImplementedError

    def put(self, item: T) -> None:
        self._queue.put(item)
        self._start()

    def hold(self, key: Hashable, item: T, seconds: float) -> None:
        """Send ``item`` in ``seconds``, merged with what else is held under ``key`` by then
        (the first item held under a key sets when they all go)."""
        with self._lock:
            held = self._held.get(key)
            if held is None:
                self._held[key] = _Held(item, time.monotonic() + seconds)
            else:
                held.item = self.merge(held.item, item)
            first = held is None
        if first:
            self.put(_Wake())  # type: ignore[arg-type]

    def discard(self, key: Hashable) -> bool:
        """Drop, unsent, what is held under ``key``; True when something held under it was
        taken to be sent since it was last discarded."""
        with self._lock:
            self._held.pop(key, None)
            taken = key in self._taken
            self._taken.pop(key, None)
            return taken

    def flush(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds until everything put or held before is sent; True if it was."""
        with self._lock:
            for held in self._held.values():
                held.due = 0.0
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
                if isinstance(item, _Wake):
                    continue
                if not isinstance(item, _Flush):
                    batch.append(item)
                    continue
                conn = self._send_batch(conn, [*self._due(), *batch])
                batch = []
                item.done.set()
            conn = self._send_batch(conn, [*self._due(), *batch])

    def _due(self) -> list[T]:
        """Take the held items that are due, in the order they were first held."""
        now = time.monotonic()
        with self._lock:
            due = [key for key, held in self._held.items() if held.due <= now]
            for key in due:
                self._taken[key] = None
            while len(self._taken) > self.remembered_keys:
                del self._taken[next(iter(self._taken))]
            return [self._held.pop(key).item for key in due]

    def _next_due(self) -> float | None:
        """Seconds until the next held item is due (None when nothing is held)."""
        with self._lock:
            if not self._held:
                return None
            return max(0.0, min(held.due for held in self._held.values()) - time.monotonic())

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

    def _take_all(self) -> list[T | _Flush | _Wake]:
        """The next item (waiting for one, or until a held item is due) and every item
        queued behind it."""
        try:
            taken: list[T | _Flush | _Wake] = [self._queue.get(timeout=self._next_due())]
        except queue.Empty:
            return []
        while True:
            try:
                taken.append(self._queue.get_nowait())
            except queue.Empty:
                return taken
