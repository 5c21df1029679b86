"""``AgentHandle``: a started run, to wait for or to look up again later.

    >>> handle = executor.execute(agent, "Summarize DBOS")     # doctest: +SKIP
    >>> handle.result(timeout=60).output                        # doctest: +SKIP
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from dbos import DBOS, WorkflowStatusString

from helix_dbos.errors import HelixError
from helix_dbos.types import AgentResult

_DONE = {
    WorkflowStatusString.SUCCESS.value,
    WorkflowStatusString.ERROR.value,
    WorkflowStatusString.CANCELLED.value,
    WorkflowStatusString.MAX_RECOVERY_ATTEMPTS_EXCEEDED.value,
}


@dataclass(frozen=True)
class AgentHandle:
    """A run of a session: ``session_id``, ``run`` number and DBOS ``workflow_id``."""

    session_id: str
    run: int
    workflow_id: str

    def status(self) -> str | None:
        """The DBOS workflow status (PENDING, SUCCESS, ERROR, CANCELLED, ...)."""
        status = DBOS.get_workflow_status(self.workflow_id)
        return status.status if status else None

    def result(self, timeout: float | None = None, poll_interval: float = 0.02) -> AgentResult:
        """Wait for the run to end and return its result.

        Raises ``TimeoutError`` after ``timeout`` seconds, and re-raises the helix error
        that refused the run (for example :class:`SessionBusyError`).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while (status := self.status()) not in _DONE:
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"run {self.run} of session {self.session_id} still {status} after {timeout}s")
            time.sleep(poll_interval)
        if status == WorkflowStatusString.CANCELLED.value:
            return AgentResult(session_id=self.session_id, status="aborted", error="aborted", stop_reason=None)
        try:
            value = DBOS.retrieve_workflow(self.workflow_id).get_result()
        except HelixError:
            raise
        except Exception as exc:
            return AgentResult(session_id=self.session_id, status="failed", error=f"{type(exc).__name__}: {exc}")
        return AgentResult.model_validate(value)
