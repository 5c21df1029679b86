"""Where the LLM step sends its token deltas: tagged with session, run, step and attempt,
published to the channels of the session and of the sessions above it
(``helix_dbos.store.deltas``), never stored::

    sink = StepDeltas(runtime.deltas, session_id, run=1, step=3)
    result, usage = await generate_with_retry(..., on_delta=sink)
    await sink.flush()           # the deltas go out before the step's result is used

``attempt`` is the time (microseconds since the epoch) when a model call attempt sent its
first delta: a retry within the step and a re-run after a crash both get a larger one, so
a consumer keeps, per ``(session_id, run, step)``, the deltas of the largest attempt it has seen.
"""

from __future__ import annotations

import asyncio
import logging
import time

from helix_dbos.deltas import Delta, DeltaRecord
from helix_dbos.store.deltas import DeltaPublisher

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
