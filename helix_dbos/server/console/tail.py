"""The session page's live tail: the session's events as log lines, and its status each
time it changes, as Server-Sent Events.

Each event of the durable stream becomes one ``line`` frame (``id: <seq>``, so the
browser resumes with ``Last-Event-ID``) that says what happened in the words of
``helix-dbos tail``::

    id: 7
    event: line
    data: {"seq":7,"run":1,"step":2,"at":"09:41:07","type":"tool_result","text":"lookup [c1]: ok","taken":"c1"}

``taken`` is the id of the call whose result this is: the page then marks that call,
which it showed with its answer, as settled by the run. Each time the tail has caught
up with the stream it reads the session's status and sends a ``status`` frame when it
differs from the last one sent (``{"status": "completed"}``), so the page's status
follows the run without a reload.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from pydantic import ValidationError

from helix_dbos._client.live import CAUGHT_UP, IDLE, LiveStreams
from helix_dbos.events import compact
from helix_dbos.sse import KEEPALIVE
from helix_dbos._store.records import EventRecord

KEEPALIVE_SECONDS = 15.0


async def tail_frames(live: LiveStreams, session_id: str, from_seq: int) -> AsyncIterator[str]:
    """The session's events from ``from_seq`` as ``line`` frames, a ``status`` frame each
    time its status has changed, and a keep-alive comment after each quiet spell. Never ends."""
    shown: str | None = None
    stream = live.follow(session_id, from_seq, until_run_end=False, heartbeat=KEEPALIVE_SECONDS, marks=True)
    async for item in stream:
        if item is IDLE:
            yield KEEPALIVE
        elif item is CAUGHT_UP:
            row = await live.session_row(session_id)
            if row is not None and row.status.value != shown:
                shown = row.status.value
                yield _frame("status", {"status": shown})
        elif isinstance(item, EventRecord):
            yield _frame("line", line_of(item), seq=item.seq)


def line_of(record: EventRecord) -> dict[str, Any]:
    """One event as a log line: when, where, its type, what it says, and the call it answers.

        >>> from datetime import datetime
        >>> line_of(EventRecord(session_id="s1", seq=3, run=1, step=1, type="tool_call",
        ...                     data={"tool_call_id": "r1", "tool_name": "refund", "input": {"amount": 7}},
        ...                     created_at=datetime(2026, 1, 2, 9, 41, 7)))["text"]
        'refund [r1] {"amount":7}'
    """
    return {
        "seq": record.seq,
        "run": record.run,
        "step": record.step,
        "at": record.created_at.strftime("%H:%M:%S"),
        "type": record.type,
        "text": _summary(record),
        "taken": record.data.get("tool_call_id") if record.type == "tool_result" else None,
    }


def _summary(record: EventRecord) -> str:
    """The event's one-line summary; its data, compacted, for a type this release does not know."""
    try:
        return record.event.summary()
    except ValidationError:
        return compact(record.data, 100)


def _frame(event: str, data: dict[str, Any], seq: int | None = None) -> str:
    head = "" if seq is None else f"id: {seq}\n"
    return f"{head}event: {event}\ndata: {json.dumps(data, separators=(',', ':'), ensure_ascii=False)}\n\n"
