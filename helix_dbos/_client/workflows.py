"""How operator commands reach DBOS workflows: in this process, or through a ``DBOSClient``.

Commands (``_client/commands.py``) take a :class:`Workflows`, so the executor (DBOS launched
here) and the URL-only admin API (no DBOS launched) share one implementation of every
command::

    LocalWorkflows(url)                    # DBOS.cancel_workflow, ... in a launched process
    with ClientWorkflows(url) as wf: ...   # the same through a DBOSClient, from any process

A message sent to a workflow commits with helix's own statements when both run in one
:meth:`Workflows.transaction` (DBOS sends in a caller's transaction only on a SQLAlchemy
connection, so that transaction is one, and helix's statements run on its psycopg
connection)::

    with workflows.transaction() as transaction:
        writes.record_answer(transaction.conn, ...)
        transaction.send(workflow_id, message, topic, idempotency_key)
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Protocol

import sqlalchemy as sa
from dbos import WorkflowSerializationFormat
from opentelemetry import context as otel_context
from psycopg import Connection
from pydantic import ValidationError

from helix_dbos._database import render_url
from helix_dbos._durable.payloads import WORKFLOW_NAME, RunRequest
from helix_dbos._store.pools import transaction_connection
from helix_dbos._store.retry import recognize_lost_connections

PORTABLE = WorkflowSerializationFormat.PORTABLE
"""Everything helix sends or enqueues is portable JSON: readable by anyone, never unpickled."""


class Workflows(Protocol):
    """The DBOS operations operator commands need."""

    def enqueue(self, request: RunRequest, workflow_id: str, queue: str, priority: int | None) -> Any: ...

    def transaction(self) -> AbstractContextManager[MessageTransaction]:
        """A transaction on the system database in which helix's statements and messages to
        workflows commit together."""
        ...

    def cancel(self, workflow_id: str) -> None: ...

    def resume(self, workflow_id: str) -> None: ...

    def status(self, workflow_id: str) -> str | None: ...

    def run_request(self, workflow_id: str) -> RunRequest | None:
        """The request the workflow was started with; None when there is no such workflow
        or its input is not a run request."""
        ...

    def delete(self, workflow_ids: list[str]) -> None:
        """Delete finished workflows and everything DBOS keeps of them."""
        ...


class MessageTransaction:
    """One transaction on the system database (see :meth:`Workflows.transaction`): helix's
    statements run on :attr:`conn`, and :meth:`send` adds a message to a workflow to the
    same commit."""

    def __init__(self, conn: Connection[Any], sql: sa.Connection, workflows: ClientWorkflows) -> None:
        self.conn = conn
        """The transaction's psycopg connection, for helix's statements."""
        self._sql = sql
        self._workflows = workflows

    def send(self, workflow_id: str, message: Any, topic: str, idempotency_key: str) -> None:
        """Send ``message`` to the workflow when the transaction commits."""
        self._workflows.client.send_in_transaction(
            self._sql, workflow_id, message, topic, idempotency_key=idempotency_key, serialization_type=PORTABLE
        )


class ClientWorkflows:
    """:class:`Workflows` through a ``DBOSClient`` on ``database_url``, made on first use."""

    def __init__(self, database_url: str, *, application_name: str | None = None) -> None:
        self.database_url = database_url
        self.application_name = application_name
        self._client: Any = None
        self._engine: sa.Engine | None = None
        """Where :meth:`transaction` takes its connections, made on first use."""

    @property
    def client(self) -> Any:
        if self._client is None:
            from dbos import DBOSClient

            recognize_lost_connections()
            self._client = DBOSClient(system_database_url=self.database_url, application_name=self.application_name)
        return self._client

    def enqueue(
        self,
        request: RunRequest,
        workflow_id: str,
        queue: str,
        priority: int | None,
        app_version: str | None = None,
        application_name: str | None = None,
    ) -> Any:
        options: dict[str, Any] = {
            "workflow_name": WORKFLOW_NAME,
            "queue_name": queue,
            "workflow_id": workflow_id,
            "workflow_id_reuse_policy": "reject",
            "deduplication_id": request.session_id,
            "serialization_type": PORTABLE,
            "otel_context": otel_context.get_current(),  # DBOS's span of the run nests under the caller's
        }
        if priority is not None:
            options["priority"] = priority
        if app_version is not None:
            options["app_version"] = app_version
        if application_name is not None:
            options["application_name"] = application_name
        return self.client.enqueue(options, request.model_dump(mode="json"))

    @contextmanager
    def transaction(self) -> Iterator[MessageTransaction]:
        if self._engine is None:
            recognize_lost_connections()
            url = render_url(self.database_url, drivername="postgresql+psycopg")
            self._engine = sa.create_engine(url, pool_pre_ping=True)
        with self._engine.begin() as sql, transaction_connection(sql) as conn:
            yield MessageTransaction(conn, sql, self)

    def cancel(self, workflow_id: str) -> None:
        self.client.cancel_workflow(workflow_id)

    def resume(self, workflow_id: str) -> None:
        self.client.resume_workflow(workflow_id)

    def status(self, workflow_id: str) -> str | None:
        found = self.client.list_workflows(workflow_ids=[workflow_id], load_input=False, load_output=False)
        return found[0].status if found else None

    def run_request(self, workflow_id: str) -> RunRequest | None:
        found = self.client.list_workflows(workflow_ids=[workflow_id], load_input=True, load_output=False)
        return _request_of(found[0].input) if found else None

    def delete(self, workflow_ids: list[str]) -> None:
        self.client.delete_workflows(workflow_ids)

    def close(self) -> None:
        if self._client is not None:
            self._client.destroy()
            self._client = None
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None

    def __enter__(self) -> ClientWorkflows:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LocalWorkflows(ClientWorkflows):
    """:class:`Workflows` through the ``DBOS`` of this (launched) process; messages still go
    through a client, the only DBOS API that sends inside the caller's transaction."""

    def enqueue(self, request: RunRequest, workflow_id: str, queue: str, priority: int | None) -> Any:  # type: ignore[override]
        """Enqueue the run, with the caller's span (``PropagateOtelContext``); DBOS's handle on it."""
        from dbos import DBOS, PropagateOtelContext, SetEnqueueOptions, SetWorkflowID

        from helix_dbos._durable.workflow import agent_run_workflow

        with SetWorkflowID(workflow_id, workflow_id_reuse_policy="reject"), SetEnqueueOptions(
            deduplication_id=request.session_id, priority=priority
        ), PropagateOtelContext():
            return DBOS.enqueue_workflow(queue, agent_run_workflow, request.model_dump(mode="json"))

    def cancel(self, workflow_id: str) -> None:
        from dbos import DBOS

        DBOS.cancel_workflow(workflow_id)

    def resume(self, workflow_id: str) -> None:
        from dbos import DBOS

        DBOS.resume_workflow(workflow_id)

    def status(self, workflow_id: str) -> str | None:
        from dbos import DBOS

        found = DBOS.get_workflow_status(workflow_id)
        return found.status if found else None

    def run_request(self, workflow_id: str) -> RunRequest | None:
        from dbos import DBOS

        found = DBOS.list_workflows(workflow_ids=[workflow_id], load_input=True, load_output=False)
        return _request_of(found[0].input) if found else None

    async def run_request_async(self, workflow_id: str) -> RunRequest | None:
        """:meth:`run_request` for async code (DBOS's ``list_workflows_async``)."""
        from dbos import DBOS

        found = await DBOS.list_workflows_async(workflow_ids=[workflow_id], load_input=True, load_output=False)
        return _request_of(found[0].input) if found else None


def _request_of(inputs: Any) -> RunRequest | None:
    """The :class:`RunRequest` in a workflow's DBOS input (``{"args": [request], "kwargs": {}}``),
    or None for the input of a workflow that is not a helix run."""
    args = inputs.get("args") if isinstance(inputs, dict) else None
    if not args or len(args) != 1:
        return None
    try:
        return RunRequest.model_validate(args[0])
    except ValidationError:
        return None
