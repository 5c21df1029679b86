"""Worker processes: ``helix-dbos worker`` and ``helix-dbos recover``.

Your app module creates ``DBOS(config=...)`` and a :class:`DBOSAgentExecutor`, registers
its agents, and does NOT launch::

    # myapp.py
    DBOS(config=dbos_config(url, name="myapp"))
    executor = DBOSAgentExecutor(llm=LiteLLMAdapter(), database_url=url)
    executor.register(research_agent)

    $ helix-dbos worker --app myapp:executor --queue agents --concurrency 8 \\
          --global-concurrency 32 --rate-limit 50/1

The worker imports the module (whose executor takes this process's worker lease, see
:mod:`helix_dbos._client.leases`), gives the process an executor id (``--executor-id``,
else the one in the DBOS config or ``$DBOS__VMID``, else ``<hostname>-<pid>``), listens
only on its queue, launches DBOS (which recovers this executor id's own PENDING runs),
registers the queue, and works until SIGTERM or SIGINT. While it works it adopts the runs
of every worker of its application version whose lease expired or was released.

On SIGTERM it drains: it takes no new runs, gives its running runs ``--drain-timeout``
seconds to finish, hands what is left back to the queues at once (other workers resume it
from its last checkpoint), releases its lease and exits 0. ``helix-dbos recover`` is for
runs of executors that never kept a lease (a process of an older release, or one whose
Conductor is gone).
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from helix_dbos._client import dbos_internals
from helix_dbos._client.leases import Adoption, Drained, default_executor_id
from helix_dbos._client.queues import QueueSettings, register_queue, stored_settings
from helix_dbos.errors import HelixError

if TYPE_CHECKING:
    from helix_dbos._client.executor import DBOSAgentExecutor


def load_app(spec: str) -> DBOSAgentExecutor:
    """Import ``module[:attr]`` and return its executor (``attr`` may be a factory).

    Without ``attr``, the executor the module created is used.
    """
    from helix_dbos._client.executor import DBOSAgentExecutor

    module_name, _, attr = spec.partition(":")
    if not module_name:
        raise HelixError(f"--app {spec!r} is not module:attr")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise HelixError(f"cannot import app module {module_name!r}: {exc}") from exc
    if attr:
        try:
            found: Any = getattr(module, attr)
        except AttributeError:
            raise HelixError(f"app module {module_name!r} has no attribute {attr!r}") from None
        if not isinstance(found, DBOSAgentExecutor) and callable(found):
            found = found()
    else:
        made = [value for value in vars(module).values() if isinstance(value, DBOSAgentExecutor)]
        if len(made) != 1:
            raise HelixError(f"app module {module_name!r} has {len(made)} DBOSAgentExecutors; name one: --app {module_name}:NAME")
        found = made[0]
    if not isinstance(found, DBOSAgentExecutor):
        raise HelixError(f"--app {spec!r} is a {type(found).__name__}, not a DBOSAgentExecutor")
    return found


DEFAULT_METRICS_HOST = "0.0.0.0"
"""Where ``--metrics-port`` binds unless ``--metrics-host`` says otherwise."""


@dataclass
class Worker:
    """One worker process on a queue: ``start()`` launches, ``drain()`` stops it gracefully."""

    app: str
    settings: QueueSettings = field(default_factory=QueueSettings)
    executor_id: str | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    """Queue settings given on the command line; the rest come from the stored queue."""
    executor: DBOSAgentExecutor | None = None
    metrics_port: int | None = None
    """Serve Prometheus metrics on this port (``helix_dbos.observability.exposition``)."""
    metrics_host: str = DEFAULT_METRICS_HOST
    """The address the metrics port binds: every interface by default (Prometheus scrapes
    it from elsewhere); ``127.0.0.1`` for a scraper on the same host only."""

    def start(self, on_adopted: Callable[[Adoption], None] | None = None,
              on_fenced: Callable[[str], None] | None = None) -> None:
        """Import the app (which takes the lease), listen only on the queue, launch DBOS
        (which recovers this executor id's own PENDING runs) and register the queue."""
        from dbos import DBOS
        from dbos import error as dbos_errors

        from helix_dbos._client.launcher import launch_dbos

        # DBOS reads its executor id from $DBOS__VMID when the app module creates DBOS
        # (an ``executor_id`` in the app's own config wins): set it before the import, so
        # recovery at launch is this worker's own.
        os.environ["DBOS__VMID"] = self.executor_id or os.environ.get("DBOS__VMID") or default_executor_id()
        self.executor = load_app(self.app)
        lease = self.executor.lease
        if lease is not None:
            lease.on_adopted = on_adopted or lease.on_adopted
            lease.on_fenced = on_fenced or lease.on_fenced
        if self.metrics_port is not None:
            self._serve_metrics(self.metrics_port)
        try:
            DBOS.listen_queues([self.settings.name])
        except dbos_errors.DBOSException:
            pass  # the app chose its queues itself
        launch_dbos()
        self.executor_id = DBOS.executor_id
        stored = stored_settings(self.settings.name)
        if stored is not None:
            self.settings = stored.model_copy(update=self.overrides)
            QueueSettings.model_validate(self.settings.model_dump())
        register_queue(self.settings)

    def _serve_metrics(self, port: int) -> None:
        """``/metrics`` on ``port``, before DBOS takes any work: a port that cannot be bound
        fails the start, and the lease the executor took is released (no one waits for it
        to expire)."""
        from helix_dbos.observability.exposition import serve_metrics

        assert self.executor is not None
        try:
            serve_metrics(port, self.executor.database_url, self.metrics_host)
        except HelixError:
            if self.executor.lease is not None:
                self.executor.lease.release()
            raise

    def drain(self, timeout: float, hurry: threading.Event | None = None) -> Drained:
        """Stop taking runs, let the running ones finish for up to ``timeout`` seconds, hand
        the rest back and release the lease (:func:`helix_dbos._client.launcher.drain`);
        exit the process next."""
        from helix_dbos._client.launcher import drain

        return drain(timeout, hurry)

    def recover(self, executor_ids: Sequence[str]) -> list[str]:
        """Hand the PENDING runs of dead executors back to their queues; their workflow ids."""
        return dbos_internals.recover_executors(executor_ids)


EXIT_FENCED = 3
"""A worker's exit status when it stopped because another process adopted its runs."""


def serve(worker: Worker, recover_ids: Sequence[str] = (), echo: Callable[[str], None] = print,
          drain_timeout: float = 30.0) -> int:
    """Start ``worker``, recover ``recover_ids``, work until SIGTERM or SIGINT, then drain
    (a second signal cuts the grace period short). Its exit status: 0, or
    :data:`EXIT_FENCED` when it lost its lease."""
    stop = threading.Event()
    hurry = threading.Event()
    fenced: list[str] = []

    def on_signal(*_: Any) -> None:
        (hurry if stop.is_set() else stop).set()

    def on_fenced(adopter: str) -> None:
        fenced.append(adopter)
        stop.set()
        hurry.set()

    def on_adopted(adoption: Adoption) -> None:
        echo(f"adopted {len(adoption.workflow_ids)} runs of executor {adoption.executor_id}")

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    worker.start(on_adopted=on_adopted, on_fenced=on_fenced)
    lease = worker.executor.lease if worker.executor is not None else None
    lease_text = f", lease {lease.settings.ttl_sec:g}s" if lease is not None else ", no lease (Conductor recovers)"
    echo(f"worker {worker.executor_id} listening on {worker.settings.describe()}{lease_text}")
    if worker.metrics_port is not None:
        echo(f"metrics on http://{_host_in_url(worker.metrics_host)}:{worker.metrics_port}/metrics")
    if recover_ids:
        recovered = worker.recover(recover_ids)
        echo(f"recovered {len(recovered)} runs of executor {', '.join(recover_ids)}")
        for workflow_id in recovered:
            echo(f"  {workflow_id}")
    stop.wait()
    if fenced:
        echo(f"worker {worker.executor_id} lost its lease to {fenced[0]}: its runs go on there; stopping")
    else:
        echo(f"worker {worker.executor_id} draining (up to {drain_timeout:g}s)")
    drained = worker.drain(0 if fenced else drain_timeout, hurry)
    echo(f"worker {worker.executor_id} finished {drained.finished} runs and handed back"
         f" {len(drained.handed_back)} in {drained.seconds:.1f}s")
    for workflow_id in drained.handed_back:
        echo(f"  {workflow_id}")
    echo(f"worker {worker.executor_id} stopped")
    return EXIT_FENCED if fenced else 0


def _host_in_url(host: str) -> str:
    """``host`` as a URL names it (an IPv6 address in brackets)."""
    return f"[{host}]" if ":" in host else host
