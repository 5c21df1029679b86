"""``helix-dbos serve``: the agent server under uvicorn, in a process that also runs the
agents (a queue worker) unless told not to::

    $ helix-dbos serve --app myapp:executor --auth myapp:authenticate --port 8000
    $ helix-dbos serve --app myapp:executor --auth myapp:authenticate --authorize myapp:authorize
    $ helix-dbos serve --app myapp:executor --allow-unauthenticated --no-worker

Your app module is the one ``helix-dbos worker`` takes (DBOS configured, agents
registered, not launched). Prometheus scrapes ``/metrics`` (no authentication:
``helix_dbos.observability.exposition``). With a worker, ``POST /start`` runs go to the worker's queue
when the executor has a ``default_queue``, else they run in this process; with
``--no-worker`` this process takes no queued runs and ``POST /start`` enqueues on
``--queue`` for the workers.
"""

from __future__ import annotations

import importlib
import os
import signal
from collections.abc import Callable
from typing import Any

from helix_dbos._client.executor import DBOSAgentExecutor
from helix_dbos._client.launcher import launch_dbos
from helix_dbos._client.queues import QueueSettings
from helix_dbos._client.leases import default_executor_id
from helix_dbos._client.worker import Worker, load_app
from helix_dbos.errors import HelixError
from helix_dbos.observability.exposition import with_metrics
from helix_dbos.server.app import create_app


def load_hook(spec: str, option: str = "--auth") -> Callable[..., Any]:
    """The callable ``module:attr`` names (``option`` names it in errors)."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise HelixError(f"{option} {spec!r} is not module:function")
    try:
        found = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise HelixError(f"cannot load {option} {spec!r}: {exc}") from exc
    if not callable(found):
        raise HelixError(f"{option} {spec!r} is a {type(found).__name__}, not a function")
    return found  # type: ignore[no-any-return]


def start_agents(app: str, queue: str, worker: bool, executor_id: str | None) -> tuple[DBOSAgentExecutor, Worker | None]:
    """Launch DBOS for the app: as a worker on ``queue``, or listening on no queue."""
    if worker:
        running = Worker(app=app, settings=QueueSettings(name=queue), executor_id=executor_id)
        running.start()
        assert running.executor is not None
        return running.executor, running
    from dbos import DBOS

    os.environ["DBOS__VMID"] = executor_id or os.environ.get("DBOS__VMID") or default_executor_id()
    executor = load_app(app)
    DBOS.listen_queues([])
    launch_dbos()
    executor.default_queue = executor.default_queue or queue
    return executor, None


def serve(
    app: str,
    *,
    host: str,
    port: int,
    auth: str | None,
    allow_unauthenticated: bool,
    worker: bool,
    queue: str,
    executor_id: str | None,
    echo: Callable[[str], None] = print,
    drain_timeout: float = 30.0,
    authorize: str | None = None,
) -> None:
    """Serve until SIGTERM or SIGINT, then drain: with a worker, its running runs get
    ``drain_timeout`` seconds to finish and what is left is handed back to the queues; the
    lease is released either way, so live processes adopt what this one leaves. The caller
    exits the process next (see :meth:`Worker.drain`)."""
    import uvicorn
    from dbos import DBOS

    authenticate = load_hook(auth) if auth else None
    policy = load_hook(authorize, "--authorize") if authorize else None
    executor, running = start_agents(app, queue, worker, executor_id)
    try:
        server_app = with_metrics(
            create_app(executor, authenticate=authenticate, authorize=policy, allow_unauthenticated=allow_unauthenticated),
            executor.database_url,
        )
        config = uvicorn.Config(server_app, host=host, port=port, log_level="warning")
        # Listening before the line below, so a client that reads it can connect at once
        # (the connection waits in the backlog until uvicorn has started).
        listening = config.bind_socket()
        listening.listen(config.backlog)
        role = f"and working on queue {queue!r}" if running else f"(no worker: runs go to queue {executor.default_queue!r})"
        echo(f"serving agents on http://{host}:{port} {role}")
        # uvicorn stops gracefully on SIGTERM/SIGINT, then raises the signal again under the
        # handlers it found: these ones let this function go on to shut DBOS down (exit 0).
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: None)
        uvicorn.Server(config).run(sockets=[listening])
    finally:
        if running is not None:
            drained = running.drain(drain_timeout)
            echo(f"finished {drained.finished} runs and handed back {len(drained.handed_back)} in {drained.seconds:.1f}s")
        else:
            DBOS.destroy(destroy_registry=False)
            if executor.lease is not None:
                executor.lease.release()
