"""One ACTIVE set of session statuses, in Python and in SQL."""

from __future__ import annotations

from typing import Any

from helix_dbos.types import ACTIVE_STATUSES, SessionStatus
from runtime_testkit import rows


def test_python_and_sql_agree_on_the_active_statuses(executor: Any) -> None:
    in_sql = rows(executor, "SELECT unnest(helix.active_statuses()) AS s")
    assert {r["s"] for r in in_sql} == {s.value for s in ACTIVE_STATUSES}
    assert all(SessionStatus(r["s"]).is_active for r in in_sql)


def test_a_status_compares_and_hashes_as_its_string() -> None:
    assert SessionStatus.ACTIVE == "active"
    assert "awaiting_approval" in ACTIVE_STATUSES
    assert "completed" not in ACTIVE_STATUSES
    assert str(SessionStatus.ABORTED) == "aborted"
