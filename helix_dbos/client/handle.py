"""``AgentHandle``: a started run, to wait for or to look up again later.

    >>> handle = executor.execute(agent, "Summarize DBOS")     # doctest: +SKIP
    >>> handle.result(timeout=60).output                        # doctest: +SKIP
"""

from __future__ import annotations

import time
from concurrent.futures import Future
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass, field
from typing import Any

from dbos import DBOS, WorkflowStatusString
from dbos import error as dbos_errors

from helix_dbos.errors import HelixError, WorkflowContextError
from helix_dbos.types import AgentResult

DONE_STATUSES = {
    WorkflowStatusString.SUCCESS.value,
    WorkflowStatusString.ERROR.value,
    WorkflowStatusString.CANCELLED.value,
    WorkflowStatusString.MAX_RECOVERY_ATTEMPTS_EXCEEDED.value,
}
_STATUS_RECHECK_SECONDS = 1.0


@dataclass(frozen=True)
class AgentHandle:
    """A run of a session: ``session_id``, ``run`` number and DBOS ``workflow_id``."""

    session_id: str
    run: int
    workflow_id: str
    _future: Future[Any] | None = field(default=None, compare=False, repr=False)
    """The run's task when this process started it: waited on instead of polling."""
    _workflow: Any = field(default=None, compare=False, repr=False)
    """DBOS's handle when workflow code started the run: its result is checkpointed."""

    def status(self) -> str | None:
        """The DBOS workflow status (PENDING, SUCCESS, ERROR, CANCELLED, ...)."""
        status = DBOS.get_workflow_status(self.workflow_id)
        return status.status if status else None

    def result(self, timeout: float | None = None, poll_interval: float = 0.02) -> AgentResult:
        """Wait for the run to end and return its result.

        A run this process started is awaited on its local task (no polling); its status
        is still re-read every second, in case another process finishes it. Raises
        ``TimeoutError`` after ``timeout`` seconds, and re-raises the helix error that
        refused the run (for example :class:`SessionBusyError`).
        """
        if DBOS.workflow_id is not None and DBOS.step_id is None:
            return self._durable_result()
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self._local_value_ready():
                assert self._future is not None
                return AgentResult.model_validate(self._future.result())
            status = self.status()
            if status in DONE_STATUSES:
                return stored_result(self.session_id, status, DBOS.retrieve_workflow(self.workflow_id))
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"run {self.run} of session {self.session_id} still {status} after {timeout}s")
            self._wait_a_little(deadline, poll_interval)

    def _durable_result(self) -> AgentResult:
        """In workflow code: DBOS records the run's result as a step of the caller, so a
        recovered caller gets the same result without waiting again."""
        if self._workflow is None:
            raise WorkflowContextError(
                "in workflow code, await a run through the handle that execute() or resume() returned there"
            )
        try:
            value = self._workflow.get_result()
        except dbos_errors.DBOSAwaitedWorkflowCancelledError:
            return AgentResult(session_id=self.session_id, status="aborted", error="aborted", stop_reason=None)
        return AgentResult.model_validate(value)

    def _local_value_ready(self) -> bool:
        """The local task returned (DBOS stores the output and SUCCESS before that)."""
        future = self._future
        return future is not None and future.done() and not future.cancelled() and future.exception() is None

    def _wait_a_little(self, deadline: float | None, poll_interval: float) -> None:
        if self._future is None or self._future.done():
            time.sleep(poll_interval)
            return
        remaining = _STATUS_RECHECK_SECONDS if deadline is None else deadline - time.monotonic()
        wait_futures([self._future], timeout=max(0.0, min(_STATUS_RECHECK_SECONDS, remaining)))


def stored_result(session_id: str, status: str, workflow: Any) -> AgentResult:
    """The result of an ended run from its DBOS workflow handle (``DBOS`` or ``DBOSClient``)."""
    if status == WorkflowStatusString.CANCELLED.value:
        return AgentResult(session_id=session_id, status="aborted", error="aborted", stop_reason=None)
    try:
        value = workflow.get_result()
    except HelixError:
        raise
    except Exception as exc:
        return AgentResult(session_id=session_id, status="failed", error=f"{type(exc).__name__}: {exc}")
    return AgentResult.model_validate(value)
