"""Queues: run agent sessions on a pool of worker processes.

A run started with ``executor.execute(agent, input, queue="agents")`` is *enqueued*
instead of started in-process: any worker process on the same database that registered
the agent and listens on that queue runs it (see ``helix-dbos worker``). The limits of
a queue live in the DBOS system database, so they hold across every worker::

    DBOS.launch()
    register_queue(QueueSettings(name="agents", worker_concurrency=8, global_concurrency=32,
                                 rate_limit=RateLimit(limit=50, period=1.0)))

Runs can be enqueued from a process that runs no DBOS at all, with only the database
URL (a web server, a cron job)::

    with RunEnqueuer(url) as enqueuer:
        run = enqueuer.enqueue("research", "What is DBOS?")
        print(enqueuer.result(run, timeout=60).output)

Every DBOS 3.4 queue is a priority queue: a lower ``priority`` number runs first, and
runs without one (priority 0) run before any prioritized run.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field, model_validator


if TYPE_CHECKING:
    from dbos import Queue

DEFAULT_QUEUE = "agents"
"""The queue name ``helix-dbos worker`` listens on unless told otherwise."""

_RATE = re.compile(r"\s*(\d+)\s*/\s*(\d+(?:\.\d+)?)\s*s?\s*")


class RateLimit(BaseModel):
    """At most ``limit`` runs start in any rolling window of ``period`` seconds, across all workers.

    Attributes:
        limit: Runs that may start in one window (at least 1).
        period: The window's length in seconds.
    """

    limit: int = Field(ge=1)
    period: float = Field(gt=0)

    @classmethod
    def parse(cls, text: str) -> RateLimit:
        """``"50/1"`` or ``"600/60s"``: calls per period in seconds.

        Args:
            text: ``N/SECONDS``, for example ``50/1`` or ``600/60s``.

        Returns:
            The rate limit.

        Raises:
            ValueError: ``text`` is not of that form.
        """
        match = _RATE.fullmatch(text)
        if match is None:
            raise ValueError(f"rate limit {text!r} is not N/SECONDS (for example 50/1 or 600/60)")
        return cls(limit=int(match.group(1)), period=float(match.group(2)))

    def __str__(self) -> str:
        return f"{self.limit}/{self.period:g}s"


class QueueSettings(BaseModel):
    """The flow control of one queue; stored in the DBOS system database, shared by all workers.

    ``worker_concurrency``: runs at once in one worker process. ``global_concurrency``:
    runs at once across all workers (a run counts from the moment a worker claims it to
    its end, including the time it waits for a human). ``rate_limit``: run starts per
    period across all workers, to protect the LLM provider. ``polling_interval_sec``:
    how often each worker looks for work.

    Attributes:
        name: The queue's name.
        worker_concurrency: Runs at once in one worker process; None for no limit.
        global_concurrency: Runs at once across all workers; None for no limit.
        rate_limit: Run starts per period across all workers; None for no limit.
        polling_interval_sec: Seconds between each worker's looks for work.
    """

    name: str = DEFAULT_QUEUE
    worker_concurrency: int | None = Field(default=None, ge=1)
    global_concurrency: int | None = Field(default=None, ge=1)
    rate_limit: RateLimit | None = None
    polling_interval_sec: float = Field(default=1.0, gt=0)

    @model_validator(mode="after")
    def _check_limits(self) -> QueueSettings:
        if (
            self.worker_concurrency is not None
            and self.global_concurrency is not None
            and self.worker_concurrency > self.global_concurrency
        ):
            raise ValueError("worker_concurrency must not exceed global_concurrency")
        return self

    def describe(self) -> str:
        """One line that names the queue and its limits, as ``helix-dbos worker`` prints it.

        Returns:
            For example ``queue 'agents', worker concurrency 8``.
        """
        parts = [f"queue {self.name!r}"]
        if self.worker_concurrency is not None:
            parts.append(f"worker concurrency {self.worker_concurrency}")
        if self.global_concurrency is not None:
            parts.append(f"global concurrency {self.global_concurrency}")
        if self.rate_limit is not None:
            parts.append(f"rate limit {self.rate_limit}")
        return ", ".join(parts)


def register_queue(
    settings: QueueSettings | str = DEFAULT_QUEUE,
    *,
    on_conflict: Literal["always_update", "never_update", "update_if_latest_version"] = "always_update",
) -> Queue:
    """Create or update the queue in the system database; call it after ``DBOS.launch()``.

    ``on_conflict="never_update"`` keeps the settings another worker stored.

    Args:
        settings: The queue's settings, or just its name.
        on_conflict: What to do when the database has settings for this queue already:
            replace them (``always_update``), keep them (``never_update``), or replace
            them only from a worker of the latest application version
            (``update_if_latest_version``).

    Returns:
        DBOS's queue.
    """
    from dbos import DBOS

    if isinstance(settings, str):
        settings = QueueSettings(name=settings)
    limiter: Any = settings.rate_limit.model_dump() if settings.rate_limit else None
    return DBOS.register_queue(
        settings.name,
        worker_concurrency=settings.worker_concurrency,
        global_concurrency=settings.global_concurrency,
        limiter=limiter,
        polling_interval_sec=settings.polling_interval_sec,
        on_conflict=on_conflict,
    )


def stored_settings(name: str) -> QueueSettings | None:
    """The settings of queue ``name`` as stored in the system database (DBOS launched), or None."""
    from dbos import DBOS

    queue = DBOS.retrieve_queue(name)
    if queue is None:
        return None
    limiter = queue.limiter
    return QueueSettings(
        name=name,
        worker_concurrency=queue.worker_concurrency,
        global_concurrency=queue.global_concurrency,
        rate_limit=RateLimit(limit=limiter["limit"], period=limiter["period"]) if limiter else None,
        polling_interval_sec=queue.polling_interval_sec,
    )


@dataclass(frozen=True)
class EnqueuedRun:
    """A run put on a queue by :class:`RunEnqueuer`."""

    session_id: str
    run: int
    workflow_id: str


class RunEnqueuer:
    """Enqueue agent runs from any process, with only the database URL (no DBOS launch).

    It writes the same ENQUEUED row ``executor.execute(..., queue=...)`` writes, through
    a :class:`dbos.DBOSClient`. Workers must have registered the agent.
    ``application_name`` and ``app_version`` default to None, which any worker of the
    latest application version on the database dequeues; set them when several DBOS
    applications share one system database.

    Args:
        database_url: The DBOS system database; default ``$HELIX_DATABASE_URL``, else
            ``$DBOS_SYSTEM_DATABASE_URL``.
        queue: The queue :meth:`enqueue` puts runs on unless told otherwise.
        application_name: The DBOS application whose workers take the runs; None for
            any.
        app_version: The application version whose workers take the runs; None for the
            latest.

    Raises:
        SchemaOutdatedError: The database's helix schema is older than this release.
        DatabaseError: The database cannot be resolved or reached.
    """

    def __init__(
        self,
        database_url: str | None = None,
        *,
        queue: str = DEFAULT_QUEUE,
        application_name: str | None = None,
        app_version: str | None = None,
    ) -> None:
        from helix_dbos._client.workflows import ClientWorkflows
        from helix_dbos._database import resolve_database_url
        from helix_dbos._store.migrations import check_schema
        from helix_dbos._store.pools import create_pool

        self.database_url = resolve_database_url(database_url)
        check_schema(self.database_url)
        self.queue = queue
        self.app_version = app_version
        self.workflows = ClientWorkflows(self.database_url, application_name=application_name)
        self.pool = create_pool(self.database_url, max_size=2)

    def enqueue(
        self,
        agent_name: str,
        input: Any,
        session_id: str | None = None,
        *,
        priority: int | None = None,
        queue: str | None = None,
        owner: str | None = None,
    ) -> EnqueuedRun:
        """Enqueue a new run of a session (a new session when ``session_id`` is None,
        belonging to ``owner``; see ``DBOSAgentExecutor.execute``).

        When it returns, the session and its run are committed and any connection reads
        them. The enqueuer does not know which agents the workers run: a run of an
        agent the worker that takes it does not know ends ``failed``, with an error that
        says so. A connection lost while enqueueing is retried, and an enqueue whose
        answer was lost returns the run it enqueued; a database that stays unreachable
        raises :class:`~helix_dbos.errors.DatabaseUnavailableError`, never a driver error.

        Args:
            agent_name: The name of the agent the workers registered.
            input: The user message: a string, or anything JSON-serializable.
            session_id: The session to continue or create; None makes a new session id.
            priority: The run's priority on its queue; lower runs first.
            queue: The queue; default the enqueuer's.
            owner: Who a new session belongs to.

        Returns:
            The enqueued run: its session id, run number and workflow id.

        Raises:
            SessionBusyError: The session has a run queued or in progress.
            SessionNotFoundError: The session exists with another owner.
            DatabaseUnavailableError: The database stayed unreachable through every retry.
        """
        from helix_dbos._client import commands
        from helix_dbos._durable.payloads import run_workflow_id

        request = commands.plan_run(self.pool, agent_name, input, session_id, owner=owner)
        workflow_id = run_workflow_id(request.session_id, request.run)
        commands.start_run(self.workflows, request, lambda: self.workflows.enqueue(
            request, workflow_id, queue or self.queue, priority, app_version=self.app_version
        ))
        commands.claim_started_run(self.pool, request, None)  # the worker adds the state its agent starts with
        return EnqueuedRun(request.session_id, request.run, workflow_id)

    def status(self, run: EnqueuedRun | str) -> str | None:
        """The DBOS status of the workflow that holds the run now (ENQUEUED, PENDING,
        SUCCESS, ...): the run's own, or its waiter or continuation once it parked.

        Args:
            run: The enqueued run, or its workflow id.

        Returns:
            The workflow's DBOS status, or None when DBOS has no such workflow.
        """
        from helix_dbos._client.handle import follow_run

        workflow_id = run if isinstance(run, str) else run.workflow_id
        return follow_run(workflow_id, self.workflows.status, self.workflows.client.retrieve_workflow)[1]

    def result(self, run: EnqueuedRun, timeout: float | None = None, poll_interval: float = 0.1) -> Any:
        """Wait for the run to end (through its waiter and continuation, if it parked);
        its :class:`AgentResult`.

        Args:
            run: The enqueued run.
            timeout: Seconds to wait at most; None waits as long as the run takes.
            poll_interval: Seconds between looks at the run's status.

        Returns:
            The run's :class:`~helix_dbos.AgentResult`.

        Raises:
            TimeoutError: The run did not end within ``timeout`` seconds.
        """
        from helix_dbos._client.handle import DONE_STATUSES, follow_run, stored_result
        from helix_dbos.types import AgentResult

        deadline = None if timeout is None else time.monotonic() + timeout
        client = self.workflows.client
        while True:
            workflow_id, status = follow_run(run.workflow_id, self.workflows.status, client.retrieve_workflow)
            if status in DONE_STATUSES:
                ended = stored_result(run.session_id, status, client.retrieve_workflow(workflow_id))
                if isinstance(ended, AgentResult):
                    return ended
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"run {run.run} of session {run.session_id} still {status} after {timeout}s")
            time.sleep(poll_interval)

    def close(self) -> None:
        """Close the enqueuer's connections (leaving a ``with`` block does it)."""
        self.workflows.close()
        self.pool.close()

    def __enter__(self) -> RunEnqueuer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
