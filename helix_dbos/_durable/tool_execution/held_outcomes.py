"""Tool outcomes a step returned, held in memory until DBOS saves the step's checkpoint.

A saved checkpoint holds the outcome, so in the common case nothing else is written. DBOS
refuses to save it when the run was aborted while the tool ran (the workflow was
cancelled and handed off): then workflow code records the outcome in
``helix.tool_outcomes``, and a resume of the run returns it without
running the tool again. A crash before the checkpoint is saved loses both, and recovery
runs the tool again, as it does a tool the crash interrupted::

    held = HeldOutcomes(runtime.record_tool_outcome)
    held.hold(row)            # the tool step, as it returns row.outcome
    held.saved(key)           # workflow code, once the step returned: its checkpoint is saved
    held.unsaved(key)         # workflow code, when the step raised instead: record the outcome
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from helix_dbos._durable.payloads import CallKey
from helix_dbos._store.records import RecordedOutcome


class HeldOutcomes:
    """The outcomes of this process's tool steps whose checkpoints are not saved yet."""

    def __init__(self, record: Callable[[RecordedOutcome], None]) -> None:
        self._record = record
        self._held: dict[CallKey, RecordedOutcome] = {}
        self._lock = threading.Lock()

    def hold(self, row: RecordedOutcome) -> None:
        with self._lock:
            self._held[(row.session_id, row.step, row.tool_call_id, row.call_digest)] = row

    def saved(self, key: CallKey) -> None:
        """The step's checkpoint is saved: forget its outcome (nothing held after a replay)."""
        with self._lock:
            self._held.pop(key, None)

    def unsaved(self, key: CallKey) -> None:
        """The step raised after its body returned (DBOS did not save the checkpoint):
        record the outcome it held, if any."""
        with self._lock:
            row = self._held.pop(key, None)
        if row is not None:
            self._record(row)
