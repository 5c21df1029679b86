"""The DBOS workflow every agent run is: ``helix_agent_run``.

It is registered when this module is imported, so it exists before ``DBOS.launch()``
recovers pending runs. Its input and output are portable JSON (a :class:`RunRequest` and
an :class:`AgentResult`), so ``dbos workflow get`` shows them to anyone, and a message
that is not portable JSON is never unpickled.
"""

from __future__ import annotations

import asyncio
from typing import Any

from dbos import DBOS, WorkflowSerializationFormat

from helix_dbos.durable.loop import AgentLoop
from helix_dbos.durable.requests import WORKFLOW_NAME, RunRequest, RunStart, run_workflow_id
from helix_dbos.durable.runtime import current_runtime
from helix_dbos.durable.scope import RunScope
from helix_dbos.durable.step_events import live_events_written
from helix_dbos.text import storable
from helix_dbos.types import AgentResult

@DBOS.workflow(name=WORKFLOW_NAME, serialization_type=WorkflowSerializationFormat.PORTABLE)
async def agent_run_workflow(request: dict[str, Any]) -> dict[str, Any]:
    """Run one agent run (``execute`` or ``resume``) of a session to its end."""
    req = RunRequest.model_validate(request)
    refusal = _foreign_copy(req)
    if refusal is not None:
        return AgentResult(session_id=req.session_id, status="failed", error=refusal, stop_reason="error").model_dump(
            mode="json"
        )
    runtime = current_runtime()
    agent = runtime.agent(req.agent_name)
    start = RunStart.model_validate(await asyncio.to_thread(runtime.begin_run, req, agent.initial_state()))
    if start.refused is not None:
        return AgentResult(session_id=req.session_id, status="failed", error=start.refused, stop_reason="error").model_dump(
            mode="json"
        )
    try:
        scope = RunScope(agent, req, first_execution=runtime.first_execution(DBOS.workflow_id or ""))
        result = await AgentLoop(scope).run(start)
    except Exception as exc:  # DBOS's cancellation is a BaseException and passes through
        runtime.log.error("run.failed", session_id=req.session_id, run=req.run, exc_info=True)  # a bug: shown
        error = storable(f"{type(exc).__name__}: {exc}")
        await live_events_written()  # the step's events before the run's error
        await asyncio.to_thread(runtime.fail_run, req, error)
        result = AgentResult(session_id=req.session_id, status="failed", error=error, stop_reason="error")
    return result.model_dump(mode="json")


def _foreign_copy(req: RunRequest) -> str | None:
    """Why this workflow must not touch the session: it is not the run's own workflow
    (``dbos workflow fork`` made a copy under a new id), or None."""
    own = run_workflow_id(req.session_id, req.run)
    if DBOS.workflow_id == own:
        return None
    return (
        f"workflow {DBOS.workflow_id} is a copy of {own} (dbos workflow fork); a helix run cannot be forked that way"
        f" and this copy changed nothing. Fork the session instead: helix-dbos fork {req.session_id} --from-step N"
    )
