"""One LISTEN connection per process (per event loop) for every live stream in it.

The database wakes readers with ``NOTIFY helix_events, '<session id>'`` when a session's
events commit, and publishes token deltas on per-session channels
(``helix_dbos._store.delta_channels``). :class:`Notifications` holds the only listening
connection: it listens on ``helix_events`` for as long as it runs and on a session's
delta channel while a subscriber wants that session's deltas, and hands each
notification to the subscribers of its session (and to those of every session)::

    notifications = Notifications(url)
    async with notifications.subscribe("s1", deltas=True) as subscription:
        ...                                   # read what is committed, then:
        item = await subscription.next(timeout=15)
        # WAKE: new events of s1 are committed; a DeltaRecord; None: timeout passed
    async with notifications.subscribe_all() as everything:
        ...                                   # WAKE: some session's events are committed

A subscriber reads the table after it subscribed, so nothing committed in between is
missed; a notification only says "look again". Items reach a subscriber in the order
the database sent them, so the deltas a step published before its commit come before
the wake-up of that commit. After the connection is lost (a restart, a network blip)
it reconnects and wakes every subscriber, which reads the table again: events are never
lost, deltas published meanwhile are (they are best effort).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict, deque
from collections.abc import AsyncIterator, Callable
from typing import Any, Final

import psycopg
from psycopg import sql
from pydantic import ValidationError

from helix_dbos._database import libpq_url
from helix_dbos._deltas import DeltaRecord
from helix_dbos._store.delta_channels import delta_channel

logger = logging.getLogger("helix_dbos.notifications")

EVENTS_CHANNEL = "helix_events"
WAKE: Final = "wake"
"""Queued for a subscriber when its session's events were committed (or after a reconnect)."""

_RECONNECT_SECONDS = (0.1, 0.5, 1.0, 2.0, 5.0)
_READY_TIMEOUT_SECONDS = 10.0
_MAX_QUEUED_DELTAS = 10_000
"""Deltas a subscriber that does not keep up may have queued; later ones are dropped."""


class Subscription:
    """What one reader receives: :data:`WAKE` and, with ``deltas``, :class:`DeltaRecord` s."""

    def __init__(self, session_id: str, deltas: bool) -> None:
        self.session_id = session_id
        self.channel = delta_channel(session_id) if deltas else None
        self._items: deque[DeltaRecord | str] = deque()
        self._queued_deltas = 0
        self._arrived = asyncio.Event()
        self.ready = asyncio.Event()
        """Set once the connection listens for everything this subscriber wants."""

    def wake(self) -> None:
        if not self._items or self._items[-1] is not WAKE:
            self._items.append(WAKE)
        self._arrived.set()

    def put(self, delta: DeltaRecord) -> None:
        if self._queued_deltas >= _MAX_QUEUED_DELTAS:
            return
        self._queued_deltas += 1
        self._items.append(delta)
        self._arrived.set()

    async def next(self, timeout: float | None = None) -> DeltaRecord | str | None:
        """The next item, waiting up to ``timeout`` seconds (None when it passed)."""
        if not self._items:
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), timeout)
            except asyncio.TimeoutError:
                return None
        item = self._items.popleft()
        if item is not WAKE:
            self._queued_deltas -= 1
        return item


class Notifications:
    """The process's listening connection on ``database_url``, started on first use in the
    running event loop and closed by :meth:`close`."""

    def __init__(self, database_url: str) -> None:
        self.database_url = database_url
        self._by_session: dict[str, set[Subscription]] = defaultdict(set)
        self._by_channel: dict[str, set[Subscription]] = defaultdict(set)
        self._everyone: set[Subscription] = set()
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.connected = False

    @property
    def subscribers(self) -> int:
        return len(self._all())

    def _all(self) -> list[Subscription]:
        return [*self._everyone, *(subscription for subs in self._by_session.values() for subscription in subs)]

    def subscribe(self, session_id: str, deltas: bool = False) -> contextlib.AbstractAsyncContextManager[Subscription]:
        """Receive the session's notifications while in the block. Entering waits (up to
        10 s) until the connection listens for them, so a read that follows misses nothing."""
        subscription = Subscription(session_id, deltas)

        def enter() -> None:
            self._by_session[session_id].add(subscription)
            if subscription.channel is not None:
                self._by_channel[subscription.channel].add(subscription)

        def leave() -> None:
            _discard(self._by_session, session_id, subscription)
            if subscription.channel is not None:
                _discard(self._by_channel, subscription.channel, subscription)

        return self._listening(subscription, enter, leave)

    def subscribe_all(self) -> contextlib.AbstractAsyncContextManager[Subscription]:
        """Be woken (:data:`WAKE`) when any session's events commit, while in the block
        (no deltas). Entering waits as :meth:`subscribe` does."""
        subscription = Subscription("", deltas=False)
        return self._listening(subscription, lambda: self._everyone.add(subscription),
                               lambda: self._everyone.discard(subscription))

    @contextlib.asynccontextmanager
    async def _listening(
        self, subscription: Subscription, enter: Callable[[], None], leave: Callable[[], None]
    ) -> AsyncIterator[Subscription]:
        """``subscription`` registered (``enter``) while in the block, once the listening
        connection has caught up with it (up to 10 s), and unregistered (``leave``) after."""
        enter()
        self._changed.set()
        self._start()
        try:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(subscription.ready.wait(), _READY_TIMEOUT_SECONDS)
            yield subscription
        finally:
            leave()
            self._changed.set()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def _start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="helix-notifications")

    async def _run(self) -> None:
        failures = 0
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(libpq_url(self.database_url), autocommit=True) as conn:
                    await conn.execute(f"LISTEN {EVENTS_CHANNEL}")
                    self.connected, failures = True, 0
                    for subscription in self._all():
                        subscription.wake()  # something may have been committed while away
                    await self._listen(conn)
            except (psycopg.Error, OSError) as exc:
                logger.warning("the notification listener lost its connection (reconnecting): %s", exc)
            self.connected = False
            for subscription in self._all():
                subscription.ready.clear()
            await asyncio.sleep(_RECONNECT_SECONDS[min(failures, len(_RECONNECT_SECONDS) - 1)])
            failures += 1

    async def _listen(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """Dispatch notifications; when the subscribers change, stop reading just long
        enough to LISTEN or UNLISTEN on delta channels."""
        listened: set[str] = set()
        while True:
            self._changed.clear()
            await self._sync_channels(conn, listened)
            reader = asyncio.ensure_future(self._dispatch(conn))
            changed = asyncio.ensure_future(self._changed.wait())
            try:
                await asyncio.wait({reader, changed}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                changed.cancel()
                if not reader.done():
                    reader.cancel()  # the connection is free again once the reader stopped
                    await asyncio.wait({reader})  # (our own cancellation still propagates)
            if not reader.cancelled():
                reader.result()  # the connection was lost: raise
                return

    async def _sync_channels(self, conn: psycopg.AsyncConnection[Any], listened: set[str]) -> None:
        wanted = {channel for channel, subs in self._by_channel.items() if subs}
        covered = self._all()
        for channel in wanted - listened:
            await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
        for channel in listened - wanted:
            await conn.execute(sql.SQL("UNLISTEN {}").format(sql.Identifier(channel)))
        listened.clear()
        listened.update(wanted)
        for subscription in covered:  # one that came meanwhile is ready after the next round
            subscription.ready.set()

    async def _dispatch(self, conn: psycopg.AsyncConnection[Any]) -> None:
        async for note in conn.notifies():
            if note.channel == EVENTS_CHANNEL:
                for subscription in (*self._by_session.get(note.payload, ()), *self._everyone):
                    subscription.wake()
                continue
            subscribers = self._by_channel.get(note.channel)
            if not subscribers:
                continue
            try:
                delta = DeltaRecord.from_payload(note.payload)
            except ValidationError:
                continue  # not ours: someone else notified on the channel
            for subscription in subscribers:
                subscription.put(delta)


def _discard(index: dict[str, set[Subscription]], key: str, subscription: Subscription) -> None:
    subscribers = index.get(key)
    if subscribers is not None:
        subscribers.discard(subscription)
        if not subscribers:
            del index[key]

