"""A session's status, and every change of it, decided in one place.

A session is *active* while a run is in progress (``active``, or waiting for a person or
a client: ``awaiting_approval``, ``awaiting_client_tool``), and otherwise tells how its
last run ended (``completed``, ``failed``, ``interrupted``, ``aborted``). What may change
it is a :data:`Change`; :func:`next_status` says what it becomes, or raises
:class:`StatusChangeRefused` when the change does not apply to the current status::

    >>> from helix_dbos.types import SessionStatus as S
    >>> next_status(S.ACTIVE, "step_committed")
    <SessionStatus.ACTIVE: 'active'>
    >>> next_status(S.ACTIVE, "suspended_for_approval")
    <SessionStatus.AWAITING_APPROVAL: 'awaiting_approval'>
    >>> next_status(S.COMPLETED, "run_started")
    <SessionStatus.ACTIVE: 'active'>

The step commit asks it for the status after a step both ways (with and without an
interrupt pending, :func:`statuses_after_step`), and the database only compare-and-sets
the one that applies, under the session row's lock; a run's end and a suspension take
theirs from :func:`next_status`.
"""

from __future__ import annotations

from typing import Literal, get_args

from helix_dbos.types import ACTIVE_STATUSES, SessionStatus

Change = Literal[
    "run_started",
    "step_committed",
    "completed",
    "failed",
    "interrupted",
    "aborted",
    "suspended_for_approval",
    "suspended_for_client_tool",
    "answered",
    "reopened",
    "reopened_awaiting_approval",
    "reopened_awaiting_client_tool",
]
"""What changes a session's status:

- ``run_started``: a new run of the session begins (``execute``, starting again after a
  run ended); never while one is in progress.
- ``step_committed``: a step committed and the run goes on.
- ``completed`` / ``failed``: the run ended with its output, or with an error (its
  workflow may also end in error).
- ``interrupted``: an interrupt was honoured at a step's commit (the run can be resumed).
- ``aborted``: the run was stopped for good (abort, or its workflow was cancelled).
- ``suspended_for_approval`` / ``suspended_for_client_tool``: the run waits for a
  person's answer, or for a client tool's result.
- ``answered``: the calls it waited for were answered (or timed out) and it goes on.
- ``reopened`` / ``reopened_awaiting_*``: DBOS resumed the run's cancelled or failed
  workflow in place; the run is active again, waiting again for the calls it waited for.
"""

CHANGES: tuple[Change, ...] = get_args(Change)

_ENDED = frozenset(SessionStatus) - ACTIVE_STATUSES
_WAITING = frozenset({SessionStatus.AWAITING_APPROVAL, SessionStatus.AWAITING_CLIENT_TOOL})

_TRANSITIONS: dict[Change, tuple[frozenset[SessionStatus], SessionStatus]] = {
    "run_started": (_ENDED, SessionStatus.ACTIVE),
    "step_committed": (ACTIVE_STATUSES, SessionStatus.ACTIVE),
    "completed": (ACTIVE_STATUSES, SessionStatus.COMPLETED),
    "failed": (ACTIVE_STATUSES, SessionStatus.FAILED),
    "interrupted": (ACTIVE_STATUSES, SessionStatus.INTERRUPTED),
    "aborted": (ACTIVE_STATUSES, SessionStatus.ABORTED),
    "suspended_for_approval": (frozenset({SessionStatus.ACTIVE}), SessionStatus.AWAITING_APPROVAL),
    "suspended_for_client_tool": (frozenset({SessionStatus.ACTIVE}), SessionStatus.AWAITING_CLIENT_TOOL),
    "answered": (_WAITING, SessionStatus.ACTIVE),
    "reopened": (frozenset({SessionStatus.ABORTED, SessionStatus.FAILED}), SessionStatus.ACTIVE),
    "reopened_awaiting_approval": (
        frozenset({SessionStatus.ABORTED, SessionStatus.FAILED}), SessionStatus.AWAITING_APPROVAL,
    ),
    "reopened_awaiting_client_tool": (
        frozenset({SessionStatus.ABORTED, SessionStatus.FAILED}), SessionStatus.AWAITING_CLIENT_TOOL,
    ),
}


class StatusChangeRefused(ValueError):
    """A change that does not apply to the session's current status (ending a run that
    has ended, starting one while one is in progress)."""


def applies(current: SessionStatus | str, change: Change) -> bool:
    """Whether ``change`` may happen to a session whose status is ``current``.

    Args:
        current: The session's status now.
        change: What would change it.

    Returns:
        True when :func:`next_status` would answer, False when it would refuse.
    """
    return SessionStatus(current) in _TRANSITIONS[change][0]


def next_status(current: SessionStatus | str, change: Change) -> SessionStatus:
    """The status a session has after ``change``.

    Args:
        current: The session's status now.
        change: What changes it.

    Returns:
        The new status.

    Raises:
        StatusChangeRefused: ``change`` does not apply to ``current``.
    """
    allowed, after = _TRANSITIONS[change]
    if SessionStatus(current) not in allowed:
        raise StatusChangeRefused(f"a session that is {SessionStatus(current).value} cannot be {change.replace('_', ' ')}")
    return after


def ending(status: SessionStatus | str | None) -> Change:
    """The change that ends a run with ``status`` (None: the run goes on).

    Args:
        status: How the step ends the run (``completed``, ``failed``, ``interrupted`` or
            ``aborted``), or None when it does not.

    Returns:
        The change to apply at the step's commit.

    Raises:
        StatusChangeRefused: ``status`` is not one a run ends with.
    """
    if status is None:
        return "step_committed"
    change = SessionStatus(status).value
    if SessionStatus(status) in ACTIVE_STATUSES:
        raise StatusChangeRefused(f"a run does not end {change}")
    return change  # type: ignore[return-value]  # the ended statuses are changes of the same name


def statuses_after_step(terminal_status: str | None) -> tuple[SessionStatus, SessionStatus]:
    """What the status of a session with a run in progress becomes when a step commits:
    without an interrupt pending, and with one (an interrupt ends a run only where the
    step does not end it already). Every status of a run in progress gives the same
    answer, so the commit needs not read it first.

    Args:
        terminal_status: How the step ends the run, or None when the run goes on.

    Returns:
        ``(status, status_if_interrupted)``.

    Raises:
        StatusChangeRefused: ``terminal_status`` is not one a run ends with.

    >>> statuses_after_step(None)
    (<SessionStatus.ACTIVE: 'active'>, <SessionStatus.INTERRUPTED: 'interrupted'>)
    >>> statuses_after_step("completed")
    (<SessionStatus.COMPLETED: 'completed'>, <SessionStatus.COMPLETED: 'completed'>)
    """
    after = next_status(SessionStatus.ACTIVE, ending(terminal_status))
    if terminal_status is not None:
        return after, after
    return after, next_status(SessionStatus.ACTIVE, "interrupted")
