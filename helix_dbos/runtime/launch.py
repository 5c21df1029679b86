"""Standalone use: configure and launch DBOS for scripts, workers and the demo.

Inside an existing DBOS app, create a :class:`DBOSAgentExecutor` yourself instead
(see the README). Standalone, one call does it all::

    executor = launch_standalone(MockLLMAdapter(...), agents=[my_agent])
    print(executor.execute(my_agent, "hi").result().output)
    shutdown()
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from dbos import DBOS

from helix_dbos.agents import AgentConfig
from helix_dbos.database import resolve_database_url
from helix_dbos.llm import LLMAdapter
from helix_dbos.runtime.executor import DBOSAgentExecutor
from helix_dbos.runtime.queues import QueueSettings, register_queue
from helix_dbos.runtime.requests import WORKFLOW_PROTOCOL_VERSION

APPLICATION_VERSION = f"helix-dbos-workflows-v{WORKFLOW_PROTOCOL_VERSION}"
"""The DBOS application version standalone processes run under.

Pinned to the workflow protocol, not to a hash of the source, so upgrading your tools
or this library (without a protocol change) still recovers pending runs.
"""


def dbos_config(database_url: str, *, name: str = "helix-dbos", **overrides: Any) -> dict[str, Any]:
    """The DBOS config a standalone process uses: our database, the pinned version."""
    config: dict[str, Any] = {
        "name": name,
        "system_database_url": database_url,
        "application_version": APPLICATION_VERSION,
        "log_level": "WARNING",
    }
    config.update(overrides)
    return config


def launch_standalone(
    llm: LLMAdapter,
    agents: Iterable[AgentConfig] = (),
    *,
    database_url: str | None = None,
    queue: QueueSettings | None = None,
    **dbos_overrides: Any,
) -> DBOSAgentExecutor:
    """Configure DBOS on the resolved database, create the executor, register, launch.

    With ``queue``, the queue is registered after launch and ``execute`` enqueues on it
    by default (this process works on it too, with the other workers).
    """
    url = resolve_database_url(database_url)
    DBOS(config=dbos_config(url, **dbos_overrides))  # type: ignore[arg-type]
    executor = DBOSAgentExecutor(llm=llm, database_url=url, default_queue=queue.name if queue else None)
    executor.register(*agents)
    DBOS.launch()
    if queue is not None:
        register_queue(queue)
    return executor


def shutdown() -> None:
    """Stop DBOS in this process (pending runs stay pending for recovery)."""
    DBOS.destroy(destroy_registry=False)
