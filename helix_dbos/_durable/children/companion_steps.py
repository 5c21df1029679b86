"""The checkpointed transactions of the companion tools (``_durable/children/companion_calls.py`` runs them).

Each is a DBOS datasource transaction, so a replay gets the decision the first execution
made: which session a message goes to, which run number it starts, what the model saw.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

from dbos import SQLAlchemyDatasource
from psycopg import Connection
from pydantic import BaseModel

from helix_dbos import companions as spec
from helix_dbos.agents import AgentConfig
from helix_dbos._durable.payloads import run_workflow_id
from helix_dbos.events import AbortedEvent
from helix_dbos._store import companion_rows as rows
from helix_dbos._store import reads, writes
from helix_dbos._store.pools import datasource_transaction
from helix_dbos.types import ACTIVE_STATUSES, SessionStatus, UserMessage

_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


class Delivery(BaseModel):
    """What ``helix_companion_deliver`` decided for one message to a companion."""

    refused: str | None = None
    name: str = ""
    session_id: str = ""
    agent_name: str = ""
    mode: str = "blocking"
    run: int = 0
    interrupting: str | None = None
    """The workflow of the child's run in progress, asked to stop first."""


class CompanionSteps:
    """The checkpointed transactions of the companion tools (one set per process)."""

    def __init__(self, datasource: SQLAlchemyDatasource, agent: Callable[[str], AgentConfig]) -> None:
        transaction = functools.partial(datasource_transaction, datasource)
        self.deliver = transaction("helix_companion_deliver")(self._deliver)
        self.view = transaction("helix_companion_view")(self._view)
        self.terminate = transaction("helix_companion_terminate")(self._terminate)
        self.collected = transaction("helix_companion_collected")(self._collected)
        self.notices = transaction("helix_companion_notices")(self._notices)
        self._agent = agent

    def _deliver(
        self, conn: Connection[Any], scope_agent: str, parent: str, root: str, agent_type: str | None, name: str | None
    ) -> dict[str, Any]:
        """Find or create the companion a message goes to (``agent_type`` set: spawnAgent)."""
        if name is not None and not _NAME.fullmatch(name):
            return _refused(f"a companion name is 1-64 letters, digits, '_' or '-', not {name!r}")
        found = rows.find(conn, parent, name) if name is not None else None
        if agent_type is not None:
            persistent = self._agent(scope_agent).persistent_agent(agent_type)
            if persistent is None:
                return _refused(f"unknown agent type {agent_type!r}; the types are those listed in {spec.SPAWN}")
            if found is not None and found.agent_type != agent_type:
                return _refused(f"companion {name!r} is a {found.agent_type}, not a {agent_type}")
            if found is None:
                name = name or _auto_name(conn, parent, agent_type)
                child = spec.companion_session_id(parent, name)
                refusal = writes.claim_child_session(
                    conn, session_id=child, agent_name=persistent.agent.name,
                    initial_state=persistent.agent.initial_state(), root_session_id=root, parent_session_id=parent,
                    parent_tool_call_id=spec.companion_owner(name), first_workflow_id=run_workflow_id(child, 1),
                )
                if refusal is not None:
                    return _refused(refusal)
                rows.insert(conn, parent, name, agent_type, persistent.mode, child)
                found = rows.find(conn, parent, name)
        if found is None:
            return _refused(f"there is no companion named {name!r}; start one with {spec.SPAWN}")
        if found.status in (SessionStatus.AWAITING_APPROVAL, SessionStatus.AWAITING_CLIENT_TOOL):
            return _refused(f"companion {found.name!r} waits for an answer ({found.status}); it takes no message now")
        interrupting = None
        if found.status == SessionStatus.ACTIVE.value and found.run_count > 0:
            writes.request_interrupt(conn, found.child_session_id)
            interrupting = reads.run_workflow(conn, found.child_session_id, found.run_count)
        return Delivery(
            name=found.name, session_id=found.child_session_id, agent_name=self._companion_agent(scope_agent, found.agent_type),
            mode=found.mode, run=found.run_count + 1, interrupting=interrupting,
        ).model_dump(mode="json")

    def _companion_agent(self, scope_agent: str, agent_type: str) -> str:
        persistent = self._agent(scope_agent).persistent_agent(agent_type)
        if persistent is None:
            raise ValueError(f"agent {scope_agent!r} no longer has persistent agent {agent_type!r}")
        return persistent.agent.name

    def _view(self, conn: Connection[Any], parent: str, name: str | None) -> dict[str, Any]:
        """The companions (``name`` None) or one of them, as the model sees them, and the
        workflow of a named one's run in progress."""
        if name is None:
            return {"children": [c.view() for c in rows.list_for(conn, parent)]}
        found = rows.find(conn, parent, name)
        if found is None:
            return {"error": f"there is no companion named {name!r}"}
        running = found.status in ACTIVE_STATUSES and found.run_count > 0
        workflow = reads.run_workflow(conn, found.child_session_id, found.run_count) if running else None
        return {"child": found.view(), "workflow_id": workflow, "run": found.run_count}

    def _terminate(self, conn: Connection[Any], parent: str, name: str, reason: str) -> dict[str, Any]:
        found = rows.find(conn, parent, name)
        if found is None:
            return {"error": f"there is no companion named {name!r}"}
        if found.status not in ACTIVE_STATUSES or found.run_count == 0:
            return {"child": found.view(), "workflow_id": None}
        writes.end_run(
            conn, session_id=found.child_session_id, run=found.run_count, status="aborted", error=reason,
            stop_reason="aborted", event=AbortedEvent(reason=reason),
        )
        workflow = reads.run_workflow(conn, found.child_session_id, found.run_count)
        return {"child": {**found.view(), "status": "aborted"}, "workflow_id": workflow}

    def _collected(self, conn: Connection[Any], child: str, child_run: int, run: int, step: int) -> None:
        rows.mark_delivered(conn, child, child_run, run, step)

    def _notices(self, conn: Connection[Any], parent: str, run: int, step: int) -> list[dict[str, Any]]:
        taken = rows.take_notices(conn, parent, run, step)
        return [UserMessage(content=spec.notice_text(n.name, n.status, n.output, n.error)).model_dump(mode="json")
                for n in taken]


def _refused(why: str) -> dict[str, Any]:
    return Delivery(refused=why).model_dump(mode="json")


def _auto_name(conn: Connection[Any], parent: str, agent_type: str) -> str:
    """``<agentType>-<n>``: the next counter of that type not taken by a given name."""
    counter = rows.count_of_type(conn, parent, agent_type) + 1
    while rows.find(conn, parent, f"{agent_type}-{counter}") is not None:
        counter += 1
    return f"{agent_type}-{counter}"
