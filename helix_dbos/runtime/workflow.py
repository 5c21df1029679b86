"""The DBOS workflow every agent run is: ``helix_agent_run``.

It is registered when this module is imported, so it exists before ``DBOS.launch()``
recovers pending runs. The executor of the process installs itself with
:func:`install_executor`; the workflow finds agents, the LLM adapter and the
datasource through it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from dbos import DBOS
from dbos._error import DBOSWorkflowCancelledError

from helix_dbos.errors import HelixError
from helix_dbos.runtime.loop import AgentLoop
from helix_dbos.runtime.requests import RunRequest
from helix_dbos.types import AgentResult

if TYPE_CHECKING:
    from helix_dbos.runtime.executor import DBOSAgentExecutor

logger = logging.getLogger("helix_dbos")

_executor: DBOSAgentExecutor | None = None


def install_executor(executor: DBOSAgentExecutor) -> None:
    """Make ``executor`` the one this process's workflows run with."""
    global _executor
    _executor = executor


def current_executor() -> DBOSAgentExecutor:
    if _executor is None:
        raise HelixError("no DBOSAgentExecutor was created in this process before DBOS.launch()")
    return _executor


@DBOS.workflow(name="helix_agent_run")
async def agent_run_workflow(request: dict[str, Any]) -> dict[str, Any]:
    """Run one agent run (``execute`` or ``resume``) of a session to its end."""
    executor = current_executor()
    req = RunRequest.model_validate(request)
    agent = executor.agent(req.agent_name)
    start = await asyncio.to_thread(executor.begin_run, req, agent.initial_state())
    try:
        result = await AgentLoop(executor, agent, req).run(start)
    except DBOSWorkflowCancelledError:
        raise
    except Exception as exc:  # a bug or an unexpected failure: end the run visibly, not silently
        logger.exception("run %s of session %s failed", req.run, req.session_id)
        error = f"{type(exc).__name__}: {exc}"
        await asyncio.to_thread(executor.fail_run, req, error)
        result = AgentResult(session_id=req.session_id, status="failed", error=error, stop_reason="error")
    return result.model_dump(mode="json")
