"""Crash test for token deltas: SIGKILL a real worker while its model streams,
recover, and check what a consumer that listened throughout received.

The killed attempt's deltas stay tagged with their attempt; the re-run of the LLM step
streams the whole answer again under a larger attempt, indexed from 0, so a consumer that
keeps the largest attempt per ``(session_id, run, step)`` shows exactly the answer once.
The durable stream stays gap-free with no duplicate, and its ``text`` event holds the
whole message once.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from helix_dbos._database import libpq_url
from helix_dbos._deltas import DeltaRecord
from helix_dbos._store.delta_channels import listen_statement
from helix_dbos._store.migrations import migrate

from crash_kit import finish, start_worker  # type: ignore[import-not-found]

WORKER = Path(__file__).with_name("delta_worker.py")
SESSION = "delta-crash"
ANSWER = "The quick brown fox jumps over the lazy dog, " * 4


class Listener:
    """The session's deltas as a consumer in another process receives them, in order."""

    def __init__(self, url: str) -> None:
        self.deltas: list[DeltaRecord] = []
        self._conn = psycopg.connect(libpq_url(url), autocommit=True)
        self._conn.execute(listen_statement(SESSION))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._collect, daemon=True)
        self._thread.start()

    def _collect(self) -> None:
        while not self._stop.is_set():
            for note in self._conn.notifies(timeout=0.1):
                self.deltas.append(DeltaRecord.from_payload(note.payload))

    def close(self) -> list[DeltaRecord]:
        time.sleep(0.5)  # the last notifications are on their way
        self._stop.set()
        self._thread.join(timeout=5)
        self._conn.close()
        return self.deltas


def test_a_kill_mid_stream_leaves_the_old_attempts_deltas_behind_a_complete_new_attempt(
    make_database: Callable[[], str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    url = make_database()
    migrate(url)
    marks = tmp_path_factory.mktemp("deltas")
    listener = Listener(url)
    try:
        proc = start_worker(WORKER, url, SESSION, "exec-deltas", "start", marks)
        deadline = time.monotonic() + 60
        while len(listener.deltas) < 5 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
        killed_after = len(listener.deltas)
        result = finish(start_worker(WORKER, url, SESSION, "exec-deltas", "recover", marks))
    finally:
        deltas = listener.close()

    assert result["status"] == "completed"
    assert 5 <= killed_after < len(ANSWER) // 4, "the kill must land while the model streams"
    attempts = sorted({d.attempt for d in deltas})
    assert len(attempts) == 2, f"one attempt killed, one that finished: {attempts}"
    old, new = ([d for d in deltas if d.attempt == a] for a in attempts)
    assert {(d.session_id, d.run, d.step) for d in deltas} == {(SESSION, 1, 1)}
    assert [d.index for d in old] == list(range(len(old))) and ANSWER.startswith("".join(d.text for d in old))
    assert len(old) < len(ANSWER) // 4  # cut off by the kill
    assert [d.index for d in new] == list(range(len(new))) and "".join(d.text for d in new) == ANSWER
    assert deltas.index(new[0]) > deltas.index(old[-1])  # the new attempt after the old one

    with psycopg.connect(libpq_url(url)) as conn:
        events = conn.execute(
            "SELECT seq, type, key, data FROM helix.events WHERE session_num = (SELECT num FROM helix.sessions WHERE id = %s) ORDER BY seq", (SESSION,)
        ).fetchall()
    assert [seq for seq, *_ in events] == list(range(1, len(events) + 1))
    keys = [key for _, _, key, _ in events if key is not None]
    assert len(keys) == len(set(keys))
    assert [data["content"] for _, kind, _, data in events if kind == "text"] == [ANSWER]
