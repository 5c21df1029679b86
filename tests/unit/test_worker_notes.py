"""`helix-dbos workers` and the console's workers page word each worker's state as it is:
a worker that died or stopped with no runs left is not said to have runs waiting."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from helix_dbos.admin import _worker_status
from helix_dbos._store.workers import WorkerRecord

AT = datetime(2026, 1, 2, 9, 41, 7, tzinfo=timezone.utc)
LIVE_V1 = {("app", "v1")}


def worker(state: str, expired: bool = False, adopted_runs: int | None = None) -> WorkerRecord:
    return WorkerRecord(
        executor_id="w-1", application_name="app", application_version="v1", queues=None, host="h", pid=7,
        state=state, started_at=AT, last_seen=AT, expires_at=AT, adopted_by="w-2" if adopted_runs is not None else None,
        adopted_at=AT if adopted_runs is not None else None, adopted_runs=adopted_runs, expired=expired,
    )


@pytest.mark.parametrize(
    "record, pending, live, note",
    [
        (worker("live"), 3, LIVE_V1, ""),
        (worker("draining"), 2, LIVE_V1, "stopping: finishes its runs, takes no new ones"),
        (worker("released"), 0, set(), "stopped with no runs in progress"),
        (worker("released"), 0, LIVE_V1, "stopped with no runs in progress"),
        (worker("live", expired=True), 0, set(), "died (its lease expired) with no runs in progress"),
        (worker("live", expired=True), 2, set(), "died (its lease expired); its 2 runs wait for a live worker of version v1"),
        (worker("released"), 1, set(), "stopped; its 1 run waits for a live worker of version v1"),
        (worker("live", expired=True), 1, LIVE_V1, "died (its lease expired); a live worker of its version adopts its 1 run now"),
        (worker("adopted", adopted_runs=1), 0, LIVE_V1, "adopted by w-2 (1 run handed back)"),
        (worker("adopted", adopted_runs=0), 0, LIVE_V1, "adopted by w-2 (0 runs handed back)"),
    ],
)
def test_each_worker_state_is_worded_as_it_is(record: WorkerRecord, pending: int, live: set, note: str) -> None:
    assert _worker_status(record, pending, live).note == note
