"""Token deltas: the pieces of a model's answer while it is generated, never stored.

An adapter that streams (``stream_step``, see ``helix_dbos.llm.base``) reports each piece
as a :class:`Delta`; the runtime tags it with where it belongs and publishes it as a
:class:`DeltaRecord` to consumers in any process. The durable ``text`` / ``tool_call``
events and the LLM step's checkpoint still hold the whole message; deltas only show it
early::

    >>> record = DeltaRecord(session_id="s1", run=1, step=2, attempt=7, index=0, kind="text", text="Hel")
    >>> DeltaRecord.from_payload(record.to_payload()) == record
    True
    >>> [d.text for d in split_to_fit(record.model_copy(update={"text": "x" * 9000}), 4000)]  # doctest: +ELLIPSIS
    ['xxx...', 'xxx...', 'xxx...']

``session_id`` is the session whose model produced the delta: a sub-agent's deltas reach
its own consumers and those of every session above it (the parent's stream shows them
tagged with the child, as it shows the child's durable events). ``attempt`` says which try of the step produced the delta: it grows with every model call
(a retry inside the step, or a re-run after a crash), so a consumer that sees a newer
attempt for the same ``(run, step)`` drops what it showed of the older one. ``index``
counts the deltas of one attempt from 0, in the order they were produced; a ``state``
delta holds one or more updates of a tool, joined, and its index is its first update's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

DeltaKind = Literal["text", "reasoning", "tool_call", "state"]

NOTIFY_PAYLOAD_LIMIT = 7900
"""Bytes of one published delta at most (Postgres refuses NOTIFY payloads of 8000 bytes)."""


class Delta(BaseModel):
    """One piece of a model answer: ``text`` or ``reasoning`` text, or a fragment of a tool
    call's raw JSON arguments (``kind="tool_call"``, with the call's id, name and index
    when the provider has sent them); or one ``ctx.update_state`` of a running tool
    (``kind="state"``: its RFC 6902 ``patch``, with the call's id and name, no text)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: DeltaKind
    text: str = ""
    tool_call_id: str | None = None
    tool_name: str | None = None
    tool_index: int | None = None
    patch: list[dict[str, Any]] | None = None


DeltaSink = Callable[[Delta], None]
"""Where an adapter sends its deltas; it must return at once (the runtime's never blocks)."""


class DeltaRecord(Delta):
    """A delta as consumers receive it: which session, run, step and attempt produced it,
    and its position ``index`` within that attempt.

    Attributes:
        session_id: The session.
        run: The run.
        step: The step whose model call streamed it.
        attempt: Which try of the step produced it; a newer attempt's deltas replace an
            older one's.
        index: Its place within the attempt, from 0.
    """

    type: Literal["delta"] = "delta"
    session_id: str
    run: int
    step: int
    attempt: int
    index: int

    def to_payload(self) -> str:
        """Compact JSON, ASCII only (so ``\\u0000`` and any text survive a NOTIFY).

        Returns:
            The record as one line of JSON, without the fields that are None.
        """
        return json.dumps(self.model_dump(mode="json", exclude_none=True), separators=(",", ":"))

    @classmethod
    def from_payload(cls, payload: str) -> DeltaRecord:
        """A record from its :meth:`to_payload` text.

        Args:
            payload: The JSON text.

        Returns:
            The record.

        Raises:
            pydantic.ValidationError: ``payload`` is not a delta record.
        """
        return cls.model_validate_json(payload)


def split_to_fit(record: DeltaRecord, limit: int = NOTIFY_PAYLOAD_LIMIT) -> list[DeltaRecord]:
    """``record`` as one or more records whose payloads fit in ``limit`` bytes, its text cut
    in order (the caller numbers them); ``[]`` if even an empty text does not fit."""
    if len(record.to_payload()) <= limit:
        return [record]
    if len(record.text) < 2 or len(record.model_copy(update={"text": ""}).to_payload()) > limit:
        return []
    middle = len(record.text) // 2
    return [
        *split_to_fit(record.model_copy(update={"text": record.text[:middle]}), limit),
        *split_to_fit(record.model_copy(update={"text": record.text[middle:]}), limit),
    ]
