"""Every change of a session's status the seeds name, decided by one pure function
(``helix_dbos.orchestration.status``), and every change that does not apply refused."""

from __future__ import annotations

import pytest

from helix_dbos.orchestration.status import (
    CHANGES, StatusChangeRefused, applies, ending, next_status, statuses_after_step,
)
from helix_dbos.types import ACTIVE_STATUSES, SessionStatus

pytestmark = pytest.mark.unit

A, AA, AC = "active", "awaiting_approval", "awaiting_client_tool"
C, F, I, X = "completed", "failed", "interrupted", "aborted"

ALLOWED = {
    # a new run starts only when none is in progress: a first run, or again after any ending
    ("run_started", C): A, ("run_started", F): A, ("run_started", I): A, ("run_started", X): A,
    # a step commits and the run goes on, also after the calls it waited for were answered
    ("step_committed", A): A, ("step_committed", AA): A, ("step_committed", AC): A,
    # a run in progress ends: with its output, an error, an honoured interrupt, an abort
    ("completed", A): C, ("completed", AA): C, ("completed", AC): C,
    ("failed", A): F, ("failed", AA): F, ("failed", AC): F,
    ("interrupted", A): I, ("interrupted", AA): I, ("interrupted", AC): I,
    ("aborted", A): X, ("aborted", AA): X, ("aborted", AC): X,
    # human in the loop: a running run waits, and goes on once answered
    ("suspended_for_approval", A): AA, ("suspended_for_client_tool", A): AC,
    ("answered", AA): A, ("answered", AC): A,
    # DBOS resumes a cancelled or failed workflow in place: active, or waiting again
    ("reopened", X): A, ("reopened", F): A,
    ("reopened_awaiting_approval", X): AA, ("reopened_awaiting_approval", F): AA,
    ("reopened_awaiting_client_tool", X): AC, ("reopened_awaiting_client_tool", F): AC,
}


@pytest.mark.parametrize("change", CHANGES)
@pytest.mark.parametrize("current", [s.value for s in SessionStatus])
def test_each_change_from_each_status_is_the_named_transition_or_refused(change, current):
    expected = ALLOWED.get((change, current))
    assert applies(current, change) == (expected is not None)
    if expected is None:
        with pytest.raises(StatusChangeRefused, match=f"a session that is {current} cannot be"):
            next_status(current, change)
    else:
        assert next_status(current, change) == SessionStatus(expected)


def test_every_named_transition_is_a_change_the_module_knows():
    assert {change for change, _ in ALLOWED} == set(CHANGES)


def test_a_run_in_progress_is_one_of_the_active_statuses_and_only_it_can_end():
    for status in SessionStatus:
        assert applies(status, "aborted") == (status in ACTIVE_STATUSES)
        assert applies(status, "run_started") == (status not in ACTIVE_STATUSES)


@pytest.mark.parametrize("terminal, expected", [
    (None, (A, I)),            # goes on; an interrupt pending ends it interrupted
    (C, (C, C)),               # a step that ends the run ends it so, interrupt or not
    (F, (F, F)),
    (I, (I, I)),               # the loop saw the interrupt before the step's model call
    (X, (X, X)),
])
def test_the_status_after_a_step_without_and_with_an_interrupt_pending(terminal, expected):
    assert statuses_after_step(terminal) == tuple(SessionStatus(s) for s in expected)


@pytest.mark.parametrize("status", [A, AA, AC])
def test_a_run_does_not_end_with_a_status_of_a_run_in_progress(status):
    with pytest.raises(StatusChangeRefused, match=f"a run does not end {status}"):
        ending(status)
