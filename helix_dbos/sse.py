"""Server-Sent Events for a session's stream: durable events with ``id`` = their ``seq``,
token deltas without an id, and resuming from ``Last-Event-ID``. Pure text; the HTTP
server writes the frames::

    >>> from_seq = resume_from("41")                  # the browser reconnected
    >>> from_seq
    42
    >>> # for item in executor.stream(session_id, from_seq, deltas=True):
    >>> #     response.write(encode(item))

A frame's ``event`` is the event's type (``delta`` for a delta) and its ``data`` the item
as one line of JSON. A delta carries no id, so a client's last event id stays the last
durable event it saw, and a reconnect resumes the durable stream with no gap or duplicate
(deltas sent while it was away are not replayed: the durable ``text`` holds the message).
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from helix_dbos._deltas import DeltaRecord
from helix_dbos.errors import InvalidLastEventIdError

KEEPALIVE = ": keep-alive\n\n"
"""A comment frame: keeps proxies from closing an idle stream; clients ignore it."""


class StreamItem(Protocol):
    """A durable event record (:class:`~helix_dbos.EventRecord`) or a delta (:class:`~helix_dbos.DeltaRecord`)."""

    type: str

    def model_dump(self, *, mode: str) -> dict[str, Any]:
        """The item's fields, as pydantic dumps them.

        Args:
            mode: ``json`` for JSON data.

        Returns:
            The fields.
        """


def encode(item: StreamItem) -> str:
    """One SSE frame for an event record (``id: <seq>``) or a :class:`DeltaRecord` (no id).

    Args:
        item: An event record or a delta record.

    Returns:
        The frame, ending in a blank line.

    Examples:
        >>> encode(DeltaRecord(session_id="s1", run=1, step=1, attempt=5, index=0, kind="text", text="Hi"))
        'event: delta\\ndata: {"kind":"text","text":"Hi","type":"delta","session_id":"s1","run":1,"step":1,"attempt":5,"index":0}\\n\\n'
    """
    if isinstance(item, DeltaRecord):
        return f"event: delta\ndata: {item.to_payload()}\n\n"
    data = item.model_dump(mode="json")
    line = json.dumps(data, separators=(",", ":"), ensure_ascii=False)  # JSON escapes CR and LF
    return f"id: {data['seq']}\nevent: {item.type}\ndata: {line}\n\n"


def resume_from(last_event_id: str | None) -> int:
    """The ``from_seq`` to stream from after ``Last-Event-ID`` (0 without one).

    Args:
        last_event_id: The ``Last-Event-ID`` header, or None.

    Returns:
        The ``seq`` after it.

    Raises:
        InvalidLastEventIdError: It is not an event's ``seq``.
    """
    if last_event_id is None or last_event_id.strip() == "":
        return 0
    text = last_event_id.strip()
    if not text.isascii() or not text.isdigit():
        raise InvalidLastEventIdError(f"Last-Event-ID must be an event's seq (a whole number), got {last_event_id!r}")
    return int(text) + 1

