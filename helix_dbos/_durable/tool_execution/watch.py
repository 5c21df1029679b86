"""Telling running tools that their run was interrupted or aborted.

Interrupt and abort are rows in the database (``helix.sessions``: ``interrupt_requested``,
and a status that is no longer active), written by any process. While tool calls run in
this process, one watcher thread reads those rows for their runs every
:data:`POLL_SECONDS` and sets the calls' :class:`~helix_dbos.tools.AbortSignal`; it
first waits, so a call that ends within :data:`POLL_SECONDS` costs no read, and it stops
when no call runs, so an idle worker reads nothing::

    watch = RunWatch(pool)
    with watch.watching(session_id, run, signal):
        ...  # signal.reason becomes "interrupt" or "abort" when the run is told to stop
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import cast


from helix_dbos._store import reads
from helix_dbos._store.pools import Pool
from helix_dbos.tools import AbortReason, AbortSignal

logger = logging.getLogger("helix_dbos")

POLL_SECONDS = 0.2
"""How often the watcher reads the runs of the running tool calls."""

RunKey = tuple[str, int]


class RunWatch:
    """The running tool calls of this process, by run, and the thread that watches them."""

    def __init__(self, pool: Pool) -> None:
        self.pool = pool
        self._lock = threading.Lock()
        self._signals: dict[RunKey, list[AbortSignal]] = {}
        self._thread: threading.Thread | None = None

    @contextmanager
    def watching(self, session_id: str, run: int, signal: AbortSignal) -> Iterator[AbortSignal]:
        """Set ``signal`` when run ``run`` of ``session_id`` is interrupted or aborted, until the block ends."""
        key = (session_id, run)
        with self._lock:
            self._signals.setdefault(key, []).append(signal)
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, name="helix-run-watch", daemon=True)
                self._thread.start()
        try:
            yield signal
        finally:
            with self._lock:
                signals = self._signals[key]
                signals.remove(signal)
                if not signals:
                    del self._signals[key]

    def _watch(self) -> None:
        while True:
            time.sleep(POLL_SECONDS)  # first: calls that end sooner (most) never cost a read
            with self._lock:
                if not self._signals:
                    self._thread = None
                    return
                keys = list(self._signals)
            try:
                with self.pool.connection() as conn:
                    stopped = reads.stopped_runs(conn, keys)
            except Exception as exc:  # a connection fault: try again next round
                logger.debug("could not read the runs of running tools: %s", exc)
                stopped = {}
            for key, reason in stopped.items():
                with self._lock:
                    signals = list(self._signals.get(key, ()))
                for signal in signals:
                    signal.set(cast(AbortReason, reason))
