"""DBOS's log stays quiet about helix runs that end through abort.

An aborted run is a normal ending, so DBOS's log stays quiet about it. When a run's
workflow is cancelled (``abort``), DBOS logs WARNINGs (its asyncio tasks were cancelled;
the execution "is no longer owned", "was cancelled during execution", its "outcome was
not recorded") and then an ERROR with the traceback of
``DBOSAwaitedWorkflowCancelledError``. For helix's own workflows
(``helix:<session>:run:<n>``) the runtime takes these records off DBOS's logger and
writes them to helix's log at debug level instead (event ``run.cancel_observed``); every
other DBOS record, and every record about your own workflows, is left alone
(:func:`quiet_cancelled_runs`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable

from dbos import DBOS
from dbos import error as dbos_errors

from helix_dbos._logs import EventLog

_HELIX_WORKFLOW = re.compile(r"helix:.+?:run:\d+")
_PARKED = re.compile(
    r"^Workflow (helix:.+?:run:\d+) (?:is no longer owned by this execution|was cancelled during execution"
    r"|outcome was not recorded)"
)
_TASK_CANCELLED = "Asyncio task cancelled for workflow or step"
_CANCELLED = (dbos_errors.DBOSAwaitedWorkflowCancelledError, dbos_errors.DBOSWorkflowCancelledError)


class CancelledRunFilter(logging.Filter):
    """Drops DBOS's records about a helix run ending through cancellation; logs them to
    helix's log at debug level."""

    def __init__(self, log: Callable[[], EventLog]) -> None:
        super().__init__()
        self.log = log

    def filter(self, record: logging.LogRecord) -> bool:
        workflow_id = cancelled_helix_workflow(record)
        if workflow_id is None:
            return True
        self.log().debug("run.cancel_observed", workflow_id=workflow_id, dbos_message=record.getMessage())
        return False


def cancelled_helix_workflow(record: logging.LogRecord) -> str | None:
    """The helix workflow a DBOS record reports as cancelled (or parked), else None."""
    exc = record.exc_info[1] if record.exc_info else None
    if isinstance(exc, _CANCELLED):
        match = _HELIX_WORKFLOW.search(str(getattr(exc, "workflow_id", None) or exc))
        return match.group(0) if match else None
    if record.levelno != logging.WARNING:
        return None
    message = record.getMessage()
    if message.startswith(_TASK_CANCELLED):
        workflow_id = DBOS.workflow_id or ""  # logged inside the cancelled task, in its DBOS context
        return workflow_id if _HELIX_WORKFLOW.fullmatch(workflow_id) else None
    match = _PARKED.match(message)
    return match.group(1) if match else None


def quiet_cancelled_runs(log: Callable[[], EventLog]) -> None:
    """Install the filter on DBOS's logger once per process (a later call re-points it):
    ``log()`` is the log the dropped records go to."""
    dbos_logger = logging.getLogger("dbos")
    for existing in dbos_logger.filters:
        if isinstance(existing, CancelledRunFilter):
            existing.log = log
            return
    dbos_logger.addFilter(CancelledRunFilter(log))
