"""DBOS configuration for helix apps, and a one-call launcher for scripts, workers and the demo.

Inside your own DBOS app, build the config with :func:`dbos_config` (or set
``application_version`` yourself with :func:`application_version`) and create a
:class:`DBOSAgentExecutor` before ``DBOS.launch()`` (see the README). Standalone, one
call does it all::

    executor = launch_standalone(MockLLMAdapter(...), agents=[my_agent], name="my-script")
    print(executor.execute(my_agent, "hi").result().output)
    shutdown()
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterable
from typing import Any

from dbos import DBOS, DBOSPortableJSONSerializer

from helix_dbos.agents import AgentConfig
from helix_dbos._client.executor import DBOSAgentExecutor
from helix_dbos._client import dbos_internals
from helix_dbos._client.leases import Drained, current_lease, default_executor_id
from helix_dbos._client.queues import QueueSettings, register_queue
from helix_dbos._database import resolve_database_url
from helix_dbos.errors import ConfigurationError
from helix_dbos._durable.payloads import WAITER_WORKFLOW_NAME, WORKFLOW_PROTOCOL_VERSION
from helix_dbos.llm import LLMAdapter

DEFAULT_APP_NAME = "helix-dbos"


def application_version(app_name: str, version: str = "1") -> str:
    """The DBOS application version of release ``version`` of app ``app_name``.

    DBOS recovers a workflow only in a process of the version that started it, and a
    version name belongs to one application on a system database. So the name carries
    the app's name, your own ``version`` (bump it when YOUR workflows change
    incompatibly) and helix's workflow protocol (which changes only in a helix release
    that says so)::

        >>> application_version("billing", "3")
        'billing-3+helix4'   # under workflow protocol 4
    """
    return f"{app_name}-{version}+helix{WORKFLOW_PROTOCOL_VERSION}"


SYSTEM_DATABASE_ENGINE: dict[str, Any] = {"pool_pre_ping": False}
"""What :func:`dbos_config` sets of DBOS's system-database engine: no ping before each
use of a pooled connection. DBOS retries each of its system-database operations on a
connection error (its ``db_retry``: a dead connection fails the operation, SQLAlchemy
drops the pool's connections, DBOS runs the operation again on a new one after a second),
so the ping only costs every DBOS operation a round trip and a transaction of its own:
on the benchmark's workload a turn makes 13.7 commits with it and 7.5 without."""


def dbos_config(
    database_url: str, *, name: str = DEFAULT_APP_NAME, version: str = "1", **overrides: Any
) -> dict[str, Any]:
    """A DBOS config on ``database_url`` with a stable, app-unique application version,
    DBOS's portable JSON serializer, so every checkpoint is readable JSON and nothing is
    ever unpickled (your own workflows and steps then take and return JSON values), and
    a system-database engine that does not ping before each use (:data:`SYSTEM_DATABASE_ENGINE`).

    The executor id is ``$DBOS__VMID``, else ``<hostname>-<pid>`` (DBOS's own default,
    ``local``, would be the same in every replica of your app); a process that dies is
    adopted by the others through its worker lease (:class:`~helix_dbos.LeaseSettings`).

    ``overrides`` are any other DBOS config keys (``executor_id``, ``log_level``, ...);
    ``db_engine_kwargs`` is merged over helix's::

        >>> dbos_config(url, db_engine_kwargs={"pool_size": 40})["db_engine_kwargs"]   # doctest: +SKIP
        {'pool_pre_ping': False, 'pool_size': 40}
    """
    engine = {**SYSTEM_DATABASE_ENGINE, **(overrides.pop("db_engine_kwargs", None) or {})}
    config: dict[str, Any] = {
        "name": name,
        "system_database_url": database_url,
        "application_version": application_version(name, version),
        "serializer": DBOSPortableJSONSerializer(),
        "log_level": "WARNING",
        "db_engine_kwargs": engine,
        "executor_id": os.environ.get("DBOS__VMID") or default_executor_id(),
    }
    config.update(overrides)
    return config


def launch_standalone(
    llm: LLMAdapter,
    agents: Iterable[AgentConfig] = (),
    *,
    database_url: str | None = None,
    queue: QueueSettings | None = None,
    name: str = DEFAULT_APP_NAME,
    **dbos_overrides: Any,
) -> DBOSAgentExecutor:
    """Configure DBOS on the resolved database, create the executor, register, launch.

    With no URL configured, an embedded Postgres is started (the ``embedded`` extra). With
    ``queue``, the queue is registered after launch and ``execute`` enqueues on it by
    default (this process works on it too, with the other workers).
    """
    url = resolve_database_url(database_url, allow_embedded=True)
    DBOS(config=dbos_config(url, name=name, **dbos_overrides))  # type: ignore[arg-type]
    executor = DBOSAgentExecutor(llm=llm, database_url=url, default_queue=queue.name if queue else None)
    executor.register(*agents)
    launch_dbos()
    if queue is not None:
        register_queue(queue)
    return executor


def launch_dbos() -> None:
    """``DBOS.launch()``, with any failure as one :class:`ConfigurationError` line (a
    version name another application registered, an unreachable database, ...), and
    not DBOS's own traceback on the log as well."""
    dbos_log = logging.getLogger("dbos")
    level = dbos_log.level
    dbos_log.setLevel(logging.CRITICAL)
    try:
        DBOS.launch()
    except Exception as exc:
        first = (str(exc).strip() or type(exc).__name__).splitlines()[0]
        raise ConfigurationError(f"DBOS could not launch: {first}") from exc
    finally:
        dbos_log.setLevel(level)


def drain(timeout: float = 30.0, hurry: threading.Event | None = None) -> Drained:
    """Stop this process taking runs from queues at once, give the runs it is running
    ``timeout`` seconds (less once ``hurry`` is set) to finish, hand what is left back to
    the queues, where other processes resume it from its last checkpoint, and release the
    lease. Runs parked for a person are not waited for: they are handed back at once.

    The process should exit (or ``DBOS.destroy()``) right after: a handed-back run's tool
    that is still running here would go on while another process runs that call again.
    DBOS refuses its checkpoint, so only the tool's effect can repeat, as after a crash.
    """
    started = time.monotonic()
    lease = current_lease()
    if lease is not None:
        lease.drain()
    dbos_internals.stop_claiming(dbos_internals.configured_dbos())
    before = set(running_workflows())
    left = before
    while left and time.monotonic() < started + timeout and not (hurry is not None and hurry.is_set()):
        time.sleep(0.1)
        left = set(running_workflows())
    handed_back = dbos_internals.recover_executors([DBOS.executor_id])
    if lease is not None:
        lease.release()
    return Drained(finished=len(before - left), handed_back=handed_back, seconds=time.monotonic() - started)


def running_workflows() -> list[str]:
    """Workflow ids this process is running, not counting runs parked for people (their
    waiters wait in any process)."""
    pending = DBOS.list_workflows(status="PENDING", executor_id=DBOS.executor_id, load_input=False,
                                  load_output=False)
    return [w.workflow_id for w in pending if w.name != WAITER_WORKFLOW_NAME]


def shutdown(drain_timeout: float = 30.0) -> Drained | None:
    """Stop DBOS in this process, after a :func:`drain` when it was launched: call it
    where your app shuts down (a FastAPI lifespan's exit) instead of ``DBOS.destroy()``,
    which fails the runs it interrupts. What the drain did, or None."""
    instance = dbos_internals.configured_dbos()
    drained = drain(drain_timeout) if instance is not None and dbos_internals.is_launched(instance) else None
    DBOS.destroy(destroy_registry=False)
    return drained
