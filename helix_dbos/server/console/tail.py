"""The session page's live stream: the session's events as log lines, and a ``changed``
frame each time what the page shows has changed, as Server-Sent Events.

Each event of the durable stream becomes one ``line`` frame (``id: <seq>``, so the
browser resumes with ``Last-Event-ID``) that says what happened in the words of
``helix-dbos tail``::

    id: 7
    event: line
    data: {"seq":7,"run":1,"step":2,"at":"09:41:07","type":"tool_result","text":"lookup [c1]: ok"}

Each time the tail has caught up with the stream, and after each quiet spell
(``CHECK_SECONDS``), it reads the session's :func:`page_mark` and sends ``changed``
(``{"status": "completed"}``) when it differs from the last one sent (or from the one of
the page that opened the stream, its ``mark``): the page then fetches itself again and
swaps the sections that changed (``base.html``), so its counts, transcript, state, runs,
pending calls, answers and buttons follow the run without a reload. The quiet-spell
check catches what writes no event: an answer another operator gave, a run's DBOS
workflow ending after its last event.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator
from typing import Any

from psycopg import AsyncConnection
from pydantic import ValidationError

from helix_dbos._client.live import LiveStreams
from helix_dbos._client.streams import IDLE, follow_events_async
from helix_dbos.events import compact
from helix_dbos.sse import KEEPALIVE
from helix_dbos._store import reads
from helix_dbos._store.records import EventRecord, PendingToolCall, RunRecord, SessionRecord

CHECK_SECONDS = 5.0
"""How long the stream stays quiet before it looks at the session again (and sends a keep-alive)."""


async def tail_frames(live: LiveStreams, session_id: str, from_seq: int, shown: str | None = None) -> AsyncIterator[str]:
    """The session's events from ``from_seq`` as ``line`` frames, a ``changed`` frame each
    time the page's sections have changed (from ``shown``, the :func:`page_mark` of the
    page the browser has), and a keep-alive comment after each quiet spell. Never ends."""
    stream = follow_events_async(live, session_id, from_seq, until_run_end=False, heartbeat=CHECK_SECONDS, marks=True)
    async for item in stream:
        if isinstance(item, EventRecord):
            yield _frame("line", line_of(item), seq=item.seq)
            continue
        if item is IDLE:
            yield KEEPALIVE
        found = await live.with_connection(lambda conn: _read_mark(conn, session_id))
        if found is not None and found[1] != shown:
            status, shown = found
            yield _frame("changed", {"status": status})


def page_mark(session: SessionRecord, runs: list[RunRecord], pending: list[PendingToolCall], answers: int) -> str:
    """What the session page shows, in short: equal marks, equal sections. It covers the
    session's status and counters, its runs with their workflows' status and executor
    and their adoptions, its open pending calls and how many answers it has::

        mark = page_mark(detail.session, detail.runs, detail.pending, len(detail.answers))
    """
    shown = (
        session.status.value, session.event_seq, session.step_count, session.run_count, session.message_count,
        session.interrupt_requested,
        [(r.run, r.status, r.workflow_status, r.executor_id, len(r.adoptions)) for r in runs],
        [(c.session_id, c.tool_call_id) for c in pending],
        answers,
    )
    return hashlib.sha256(repr(shown).encode()).hexdigest()[:16]


async def _read_mark(conn: AsyncConnection[Any], session_id: str) -> tuple[str, str] | None:
    """The session's status and :func:`page_mark` (None: no such session)."""
    row = await reads.get_session_row_async(conn, session_id)
    if row is None:
        return None
    runs = await reads.list_runs_async(conn, session_id)
    pending = await reads.list_pending_async(conn, session_id)
    answers = await reads.answers_async(conn, session_id)
    return row.status.value, page_mark(row, runs, pending, len(answers))


def line_of(record: EventRecord) -> dict[str, Any]:
    """One event as a log line: when, where, its type and what it says.

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
