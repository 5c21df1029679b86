"""How many workers a tool call may cost: each attempt at a call's body is recorded, and
a run that lost its worker with the same call in flight as many times as its agent's
``max_worker_losses`` ends ``failed`` instead of running the call on one more worker.

A tool that holds the GIL in one C call for longer than the worker's lease (a runaway
regex), or that kills its process (a segfault, the OOM killer), takes its worker down
each time it runs; without a bound every live worker would adopt the run in turn and
lose itself to it. The tool step asks before it runs the body::

    await asyncio.to_thread(begin_attempt, runtime, job, agent, tool.name)   # or ToolCallLostError

A step's parallel calls that all start at once, in the run's first execution (nothing to
count), are recorded together in one statement, started as their tool steps begin; each
body waits for that record instead::

    record = asyncio.ensure_future(asyncio.to_thread(record_attempts, runtime, jobs))
    ...                                    # each job.attempt_record is record
    await job.attempt_record               # in the tool step, before the body
"""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence

from dbos import DBOS

from helix_dbos._durable.payloads import ToolJob
from helix_dbos._durable.runtime import AgentRuntime
from helix_dbos._store.retry import retry_transient
from helix_dbos._store.tool_attempts import Attempt, lost_attempts, start_attempts
from helix_dbos.agents import AgentConfig
from helix_dbos.errors import ToolCallLostError


def begin_attempt(runtime: AgentRuntime, job: ToolJob, agent: AgentConfig, tool_name: str) -> None:
    """Record that this process starts the call's body; raise :class:`ToolCallLostError`
    (recording nothing) when the run already lost ``agent.max_worker_losses`` workers with
    this call in flight. Only a step that may have run before (``job.ran_before``) counts.
    The tool step does not call it for an attempt recorded with the step's other calls
    (``job.attempt_record``)."""
    assert job.attempt_record is None
    attempt = _attempt(job)

    def record() -> list[str]:
        with runtime.statements.connection() as conn:
            lost = lost_attempts(conn, attempt) if job.ran_before else []
            if len(lost) < agent.max_worker_losses:
                start_attempts(conn, [attempt])
            return lost

    lost = retry_transient(record)
    if len(lost) >= agent.max_worker_losses:
        raise ToolCallLostError(
            f"step {job.step}'s call {job.call.id!r} of tool {tool_name!r} was in flight each time the run lost its"
            f" worker, {_times(len(lost))} ({', '.join(lost)}): the run ends here rather than run it on another worker"
            f" (max_worker_losses={agent.max_worker_losses})"
        )


def record_attempts(runtime: AgentRuntime, jobs: Sequence[ToolJob]) -> None:
    """Record, in one statement, that this process starts the bodies of these calls of one
    step, which it runs for the first time (no ``job.ran_before``: no earlier attempt to count)."""
    assert not any(job.ran_before for job in jobs)

    def record() -> None:
        with runtime.statements.connection() as conn:
            start_attempts(conn, [_attempt(job) for job in jobs])

    retry_transient(record)


def _attempt(job: ToolJob) -> Attempt:
    return Attempt(job.session_id, job.step, job.call.id, DBOS.executor_id or "", socket.gethostname(), os.getpid())


def _times(count: int) -> str:
    return "once" if count == 1 else f"{count} times"
