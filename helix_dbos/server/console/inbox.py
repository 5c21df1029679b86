"""The inbox's calls and its live stream: a ``changed`` frame each time the calls it
shows have changed, as Server-Sent Events::

    event: changed
    data: {"waiting":2}

The stream wakes when any session's events commit (a step that asks for an approval or
a client tool writes its events as it commits) and after each quiet spell
(``CHECK_SECONDS``: an answer writes no event), reads the calls the principal's inbox
shows (:func:`waiting_calls`, with the same owner filter as the page) and sends
``changed`` when they differ from the last ones sent, or from those of the page that
opened it (its ``mark``). The page then fetches itself again and swaps its list
(``base.html``).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncIterator
from typing import Any

from psycopg import AsyncConnection

from helix_dbos._client.live import LiveStreams
from helix_dbos._client.notifications import WAKE
from helix_dbos._store import reads
from helix_dbos._store.records import PendingToolCall
from helix_dbos.server.console.received import received_answers
from helix_dbos.sse import KEEPALIVE

CHECK_SECONDS = 5.0
"""How long the stream stays quiet before it reads the inbox again (and sends a keep-alive)."""
SETTLE_SECONDS = 0.5
"""How long a wake-up waits for more before it reads: a burst of commits is one read."""


async def waiting_calls(conn: AsyncConnection[Any], owner: str | None) -> list[PendingToolCall]:
    """The calls waiting for a person: pending ones not answered yet (with ``owner``, of
    that owner's sessions only)."""
    pending = await reads.list_pending_async(conn, owner=owner)
    answered = await received_answers(conn, pending)
    return [call for call in pending if (call.session_id, call.tool_call_id) not in answered]


def inbox_mark(calls: list[PendingToolCall]) -> str:
    """The inbox's calls, in short: equal marks, equal lists::

        mark = inbox_mark(await waiting_calls(conn, owner))
    """
    shown = [(call.session_id, call.tool_call_id) for call in calls]
    return hashlib.sha256(repr(shown).encode()).hexdigest()[:16]


async def inbox_frames(live: LiveStreams, owner: str | None, shown: str | None = None) -> AsyncIterator[str]:
    """``changed`` frames for the inbox of ``owner`` (None: every session's calls), from
    ``shown``, the mark of the page the browser has; a keep-alive comment after each quiet
    spell. Never ends."""
    async with live.notifications.subscribe_all() as subscription:
        while True:
            calls = await live.with_connection(lambda conn: waiting_calls(conn, owner))
            if (mark := inbox_mark(calls)) != shown:
                shown = mark
                yield f"event: changed\ndata: {json.dumps({'waiting': len(calls)})}\n\n"
            if await subscription.next(CHECK_SECONDS) is WAKE:
                await asyncio.sleep(SETTLE_SECONDS)
                while await subscription.next(0) is WAKE:
                    pass
            else:
                yield KEEPALIVE
