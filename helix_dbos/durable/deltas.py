"""Where the LLM step sends its token deltas: tagged with session, run, step and attempt,
published to the channels of the session and of the sessions above it
(``helix_dbos.store.delta_channels``), never stored::

    sink = StepDeltas(runtime.deltas, session_id, run=1, step=3)
    result, usage = await generate_with_retry(..., on_delta=sink)
    await sink.flush()           # the deltas go out before the step's result is used

A tool's ``ctx.update_state`` is published the same way, at once, as a ``state`` delta
with the RFC 6902 operations it added (:class:`LiveState`); the step's merged
``state_patch`` event stays what is durable.

``attempt`` is the time (microseconds since the epoch) when a model call attempt sent its
first delta: a retry within the step and a re-run after a crash both get a larger one, so
a consumer keeps, per ``(session_id, run, step)``, the deltas of the largest attempt it has seen.
"""

from __future__ import annotations

import asyncio
import logging
import time

from collections.abc import Callable
from typing import Any

from helix_dbos.deltas import Delta, DeltaRecord
from helix_dbos.state import StateTracker
from helix_dbos.state.rfc6902 import JsonPatchOperation
from helix_dbos.store.delta_channels import DeltaPublisher

logger = logging.getLogger("helix_dbos.deltas")

FLUSH_TIMEOUT_SECONDS = 1.0
"""How long the LLM step waits at most for its deltas to be sent."""


class StepDeltas:
    """The ``on_delta`` callback of one LLM step (``generate_with_retry`` passes the attempt)."""

    def __init__(self, publisher: DeltaPublisher, session_id: str, run: int, step: int) -> None:
        self.publisher = publisher
        self.session_id = session_id
        self.run = run
        self.step = step
        self._attempts: dict[int, int] = {}
        self._next_index: dict[int, int] = {}

    def __call__(self, retry_attempt: int, delta: Delta) -> None:
        """Publish one delta; never raises (a delta is worth less than the model call)."""
        try:
            attempt = self._attempts.setdefault(retry_attempt, time.time_ns() // 1000)
            index = self._next_index.get(retry_attempt, 0)
            record = DeltaRecord(
                session_id=self.session_id, run=self.run, step=self.step, attempt=attempt, index=index,
                **delta.model_dump(),
            )
            self._next_index[retry_attempt] = index + self.publisher.publish(record)
        except Exception:
            logger.exception("could not publish a token delta (dropped)")

    async def flush(self) -> None:
        if self._attempts:
            await asyncio.to_thread(self.publisher.flush, FLUSH_TIMEOUT_SECONDS)


class LiveState:
    """The state tracker a tool's context writes through: each ``update`` is applied to the
    tool's own tracker (what its step records) and its new RFC 6902 operations are
    published at once as a ``state`` delta of the call, best effort. ``attempt`` is the
    time the tool step began, so a re-run of the call after a crash supersedes what the
    lost attempt showed."""

    def __init__(
        self, tracker: StateTracker, publisher: DeltaPublisher, session_id: str, run: int, step: int,
        tool_call_id: str, tool_name: str,
    ) -> None:
        self.tracker = tracker
        self._publish: Callable[[DeltaRecord], int] = publisher.publish
        self._record = {"session_id": session_id, "run": run, "step": step, "tool_call_id": tool_call_id, "tool_name": tool_name}
        self._attempt = time.time_ns() // 1000
        self._index = 0

    def get_state(self) -> Any:
        return self.tracker.get_state()

    def update(self, fn: Callable[[Any], Any]) -> Any:
        before = self.tracker.get_rfc6902_patches()
        state = self.tracker.update(fn)
        added = _added(before, self.tracker.get_rfc6902_patches())
        if added:
            try:
                record = DeltaRecord(kind="state", patch=[dict(op) for op in added], attempt=self._attempt, index=self._index, **self._record)
                self._index += self._publish(record) or 1
            except Exception:
                logger.exception("could not publish a live state patch (dropped)")
        return state


def _added(before: list[JsonPatchOperation], after: list[JsonPatchOperation]) -> list[JsonPatchOperation]:
    """The operations of ``after`` that ``before`` did not have (each counted once), in order.

    >>> _added([{"op": "add", "path": "/n/-", "value": 1}],
    ...        [{"op": "add", "path": "/n/-", "value": 1}, {"op": "add", "path": "/n/-", "value": 1}])
    [{'op': 'add', 'path': '/n/-', 'value': 1}]
    """
    remaining = list(before)
    added: list[JsonPatchOperation] = []
    for op in after:
        if op in remaining:
            remaining.remove(op)
        else:
            added.append(op)
    return added
