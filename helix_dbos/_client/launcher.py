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

import asyncio
import logging
import os
import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from dbos import DBOS, DBOSPortableJSONSerializer

from helix_dbos._error_text import first_line
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

    Args:
        app_name: Your application's name.
        version: Your release of it; bump it when your own workflows change incompatibly.

    Returns:
        ``<app_name>-<version>+helix<protocol>``.
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

    Args:
        database_url: The DBOS system database, which holds helix's tables too.
        name: The DBOS application name.
        version: Your release, as for :func:`application_version`.
        **overrides: Any other DBOS config keys; ``db_engine_kwargs`` is merged over helix's.

    Returns:
        The config to pass to ``DBOS(config=...)``.
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

    Args:
        llm: The model adapter.
        agents: The agents to register.
        database_url: The database; default ``$HELIX_DATABASE_URL``, else
            ``$DBOS_SYSTEM_DATABASE_URL``, else an embedded Postgres.
        queue: A queue to register; :meth:`~helix_dbos.DBOSAgentExecutor.execute`
            enqueues on it by default.
        name: The DBOS application name.
        **dbos_overrides: Any other DBOS config keys, as for :func:`dbos_config`.

    Returns:
        The executor, with DBOS launched.

    Raises:
        ConfigurationError: DBOS could not launch.
        DatabaseError: The database cannot be resolved, reached or migrated.
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
        raise ConfigurationError(f"DBOS could not launch: {first_line(exc)}") from exc
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

    Args:
        timeout: Seconds the running runs get to finish.
        hurry: When set (for example by a second SIGTERM), stop waiting and hand back
            what is left.

    Returns:
        How many runs finished, how many were handed back, and how long it took.
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
    where your app shuts down instead of ``DBOS.destroy()``, which fails the runs it
    interrupts.

    Called where an event loop runs (the end of an async app's lifespan), the work runs
    in a worker thread while this call waits, so it blocks the loop: runs on that loop
    cannot finish during the drain and are handed back. In async code, use
    ``await shutdown_async()``, which lets them finish.

    Args:
        drain_timeout: Seconds the running runs get to finish, as for :func:`drain`.

    Returns:
        What the drain did, or None when DBOS was not launched.
    """
    if not _event_loop_running():
        return _stop(drain_timeout)
    with _shutdown_thread() as pool:
        return pool.submit(_stop, drain_timeout).result()


async def shutdown_async(drain_timeout: float = 30.0) -> Drained | None:
    """:func:`shutdown` for async code: the drain and DBOS's shutdown run in a worker
    thread while the event loop goes on, so the runs on it (started by
    ``execute_async``, the server's routes and chats) can finish within
    ``drain_timeout``; the rest are handed back to the queues and the lease is released.
    The end of a FastAPI lifespan::

        @asynccontextmanager
        async def lifespan(app: FastAPI) -> AsyncIterator[None]:
            DBOS.launch()
            yield
            await helix_dbos.shutdown_async()     # drains on Ctrl-C and SIGTERM
            await executor.close_async()

    Args:
        drain_timeout: Seconds the running runs get to finish, as for :func:`drain`.

    Returns:
        What the drain did, or None when DBOS was not launched.
    """
    pool = _shutdown_thread()
    try:
        return await asyncio.get_running_loop().run_in_executor(pool, _stop, drain_timeout)
    finally:
        pool.shutdown(wait=False)


def _stop(drain_timeout: float) -> Drained | None:
    instance = dbos_internals.configured_dbos()
    drained = drain(drain_timeout) if instance is not None and dbos_internals.is_launched(instance) else None
    DBOS.destroy(destroy_registry=False)
    return drained


def _shutdown_thread() -> ThreadPoolExecutor:
    """A thread of its own for the drain (not the loop's default pool, which the runs
    being drained may hold)."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="helix-shutdown")


def _event_loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
