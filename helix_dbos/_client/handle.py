"""``AgentHandle``: a started run, to wait for or to look up again later.

    >>> handle = executor.execute(agent, "Summarize DBOS")     # doctest: +SKIP
    >>> handle.result(timeout=60).output                        # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from concurrent.futures import Future
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass, field
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dbos import DBOS, WorkflowStatusString
from dbos import error as dbos_errors

from helix_dbos._durable.payloads import continued_by
from helix_dbos.errors import HelixError, WorkflowContextError
from helix_dbos.types import AgentResult

if TYPE_CHECKING:
    from helix_dbos._client.live import LiveStreams

DONE_STATUSES = {
    WorkflowStatusString.SUCCESS.value,
    WorkflowStatusString.ERROR.value,
    WorkflowStatusString.CANCELLED.value,
    WorkflowStatusString.MAX_RECOVERY_ATTEMPTS_EXCEEDED.value,
}
_STATUS_RECHECK_SECONDS = 1.0
_WOKEN_RECHECK_SECONDS = 0.02


@dataclass(frozen=True)
class AgentHandle:
    """A run of a session: ``session_id``, ``run`` number and DBOS ``workflow_id``.

    Attributes:
        session_id: The session.
        run: The run's number within the session, from 1.
        workflow_id: The DBOS workflow that runs it.
    """

    session_id: str
    run: int
    workflow_id: str
    _future: Future[Any] | None = field(default=None, compare=False, repr=False)
    """The run's task when this process started it: waited on instead of polling."""
    _workflow: Any = field(default=None, compare=False, repr=False)
    """DBOS's handle when workflow code started the run: its result is checkpointed."""
    _async_workflow: Any = field(default=None, compare=False, repr=False)
    """DBOS's async handle when this event loop runs the run: awaited, not polled."""
    _live: LiveStreams | None = field(default=None, compare=False, repr=False)
    """This loop's listening connection: the session's commits wake :meth:`result_async`."""

    def status(self) -> str | None:
        """The DBOS status of the workflow that holds the run now (PENDING, SUCCESS, ERROR,
        CANCELLED, ...): the run's own, or its waiter or continuation once it parked.

        Returns:
            The workflow's DBOS status, or None when DBOS has no such workflow yet.
        """
        return follow_run(self.workflow_id, _local_status, DBOS.retrieve_workflow)[1]

    def result(self, timeout: float | None = None, poll_interval: float = 0.02) -> AgentResult:
        """Wait for the run to end and return its result.

        A run this process started is awaited on its local task (no polling); its status
        is still re-read every second, in case another process finishes it. A run that
        parked to wait for people is followed through its waiter and continuation.

        Args:
            timeout: Seconds to wait at most; None waits as long as the run takes.
            poll_interval: Seconds between looks at a run this process does not run.

        Returns:
            The run's result: its status, output or error, step count and usage.

        Raises:
            TimeoutError: The run did not end within ``timeout`` seconds.
            HelixError: The run was refused (for example :class:`~helix_dbos.errors.SessionBusyError`).
        """
        if DBOS.workflow_id is not None and DBOS.step_id is None:
            return self._durable_result()
        deadline = None if timeout is None else time.monotonic() + timeout
        workflow_id, future = self.workflow_id, self._future
        while True:
            _wait_for_task(future, deadline)
            if _value_ready(future):
                assert future is not None
                ended: AgentResult | str = stored_value(self.session_id, future.result())
            else:
                status = _local_status(workflow_id)
                ended = stored_result(self.session_id, status, DBOS.retrieve_workflow(workflow_id)) if status in DONE_STATUSES else ""
            if isinstance(ended, AgentResult):
                return ended
            if ended:
                workflow_id, future = ended, None  # the run parked: its waiter, then its continuation
                continue
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"run {self.run} of session {self.session_id} still {status} after {timeout}s")
            if future is None or future.done():
                time.sleep(poll_interval)

    async def result_async(self, timeout: float | None = None) -> AgentResult:
        """Wait for the run to end without blocking the event loop or holding a thread.

        A run this loop started is awaited on its task; any other is re-checked when the
        session's events commit (the process's one listening connection wakes it) and
        every second in any case, following a parked run through its waiter and
        continuation. In workflow code, use :meth:`result` (DBOS records it there).

        Args:
            timeout: Seconds to wait at most; None waits as long as the run takes.

        Returns:
            The run's result: its status, output or error, step count and usage.

        Raises:
            TimeoutError: The run did not end within ``timeout`` seconds.
            WorkflowContextError: Called in workflow code.
        """
        if DBOS.workflow_id is not None:
            raise WorkflowContextError("in workflow code, await a run with handle.result() (DBOS records it there)")
        return await asyncio.wait_for(self._ended_async(), timeout)

    async def _ended_async(self) -> AgentResult:
        subscribing = self._live.notifications.subscribe(self.session_id) if self._live else contextlib.nullcontext()
        async with subscribing as subscription:
            workflow_id, local = self.workflow_id, self._async_workflow
            woken = False
            while True:
                if local is not None:
                    ended = await _stored_result_async(self.session_id, None, local)
                else:
                    found = await DBOS.get_workflow_status_async(workflow_id)
                    status = found.status if found else None
                    ended = ""
                    if status in DONE_STATUSES:
                        ended = await _stored_result_async(
                            self.session_id, status, await DBOS.retrieve_workflow_async(workflow_id)
                        )
                if isinstance(ended, AgentResult):
                    return ended
                if ended:
                    workflow_id, local, woken = ended, None, True  # parked: its waiter, then its continuation
                    continue
                pause = _WOKEN_RECHECK_SECONDS if woken else _STATUS_RECHECK_SECONDS
                if subscription is None:
                    await asyncio.sleep(pause)
                else:
                    woken = await subscription.next(pause) is not None

    def _durable_result(self) -> AgentResult:
        """In workflow code: DBOS records the run's result as a step of the caller, so a
        recovered caller gets the same result without waiting again (and so each result
        of a parked run's waiter and continuation)."""
        if self._workflow is None:
            raise WorkflowContextError(
                "in workflow code, await a run through the handle that execute() or resume() returned there"
            )
        try:
            value = self._workflow.get_result()
            while (next_id := continued_by(value)) is not None:
                value = DBOS.get_result(next_id)
        except dbos_errors.DBOSAwaitedWorkflowCancelledError:
            return AgentResult(session_id=self.session_id, status="aborted", error="aborted", stop_reason=None)
        return AgentResult.model_validate(value)


def _wait_for_task(future: Future[Any] | None, deadline: float | None) -> None:
    """Wait on the run's local task, for a second at most (its status is re-read then, in
    case another process ends the run) and not past ``deadline``; no wait without one."""
    if future is None or future.done():
        return
    remaining = _STATUS_RECHECK_SECONDS if deadline is None else deadline - time.monotonic()
    wait_futures([future], timeout=max(0.0, min(_STATUS_RECHECK_SECONDS, remaining)))


def _value_ready(future: Future[Any] | None) -> bool:
    """The local task returned (DBOS stores the output and SUCCESS before that)."""
    return future is not None and future.done() and not future.cancelled() and future.exception() is None


def _local_status(workflow_id: str) -> str | None:
    status = DBOS.get_workflow_status(workflow_id)
    return status.status if status else None


def follow_run(
    workflow_id: str, status_of: Callable[[str], str | None], retrieve: Callable[[str], Any]
) -> tuple[str, str | None]:
    """The workflow that holds a run now, and its DBOS status, starting from the run's
    own workflow: a parked run's workflow ended SUCCESS naming its waiter, the waiter
    names the continuation (``_durable/workflow.py``)."""
    status = status_of(workflow_id)
    while status == WorkflowStatusString.SUCCESS.value and (
        next_id := continued_by(retrieve(workflow_id).get_result())
    ) is not None:
        workflow_id, status = next_id, status_of(next_id)
    return workflow_id, status


def stored_result(session_id: str, status: str | None, workflow: Any) -> AgentResult | str:
    """The result of an ended helix workflow from its DBOS handle (``DBOS`` or
    ``DBOSClient``), or the id of the workflow that carries the run on (it parked)."""
    if status == WorkflowStatusString.CANCELLED.value:
        return AgentResult(session_id=session_id, status="aborted", error="aborted", stop_reason=None)
    try:
        value = workflow.get_result()
    except HelixError:
        raise
    except Exception as exc:
        return AgentResult(session_id=session_id, status="failed", error=f"{type(exc).__name__}: {exc}")
    return stored_value(session_id, value)


async def _stored_result_async(session_id: str, status: str | None, workflow: Any) -> AgentResult | str:
    """:func:`stored_result` from DBOS's async handle."""
    if status == WorkflowStatusString.CANCELLED.value:
        return AgentResult(session_id=session_id, status="aborted", error="aborted", stop_reason=None)
    try:
        value = await asyncio.shield(workflow.get_result())  # a caller's timeout must not cancel the run
    except dbos_errors.DBOSAwaitedWorkflowCancelledError:
        return AgentResult(session_id=session_id, status="aborted", error="aborted", stop_reason=None)
    except HelixError:
        raise
    except Exception as exc:
        return AgentResult(session_id=session_id, status="failed", error=f"{type(exc).__name__}: {exc}")
    return stored_value(session_id, value)


def stored_value(session_id: str, value: Any) -> AgentResult | str:
    """A helix workflow's output as a run's result, or the id of the workflow that carries the run on."""
    next_id = continued_by(value)
    return next_id if next_id is not None else AgentResult.model_validate(value)
