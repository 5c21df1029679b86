"""Worker processes: ``helix-dbos worker`` and ``helix-dbos recover``.

Your app module creates ``DBOS(config=...)`` and a :class:`DBOSAgentExecutor`, registers
its agents, and does NOT launch::

    # myapp.py
    DBOS(config=dbos_config(url, name="myapp"))
    executor = DBOSAgentExecutor(llm=LiteLLMAdapter(), database_url=url)
    executor.register(research_agent)

    $ helix-dbos worker --app myapp:executor --queue agents --concurrency 8 \\
          --global-concurrency 32 --rate-limit 50/1

The worker imports the module, gives the process an executor id (``--executor-id``, else
the one in the DBOS config or ``$DBOS__VMID``, else ``<hostname>-<pid>``), listens only on
its queue, launches DBOS (which recovers this executor id's own PENDING runs), registers
the queue, and runs until SIGTERM or SIGINT. When a worker dies for good, run
``helix-dbos recover --app myapp:executor --executor <its id>``: a worker of its own that
first hands the dead executor's PENDING runs back to the queue, where any worker
(itself included) resumes them from their last checkpoint. See docs/scaling.md.
"""

from __future__ import annotations

import importlib
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from helix_dbos.errors import HelixError
from helix_dbos.client.queues import QueueSettings, register_queue, stored_settings

if TYPE_CHECKING:
    from helix_dbos.client.executor import DBOSAgentExecutor


def default_executor_id() -> str:
    """``<hostname>-<pid>``: unique per worker process."""
    return f"{socket.gethostname()}-{os.getpid()}"


def load_app(spec: str) -> DBOSAgentExecutor:
    """Import ``module[:attr]`` and return its executor (``attr`` may be a factory).

    Without ``attr``, the executor the module created is used.
    """
    from helix_dbos.client.executor import DBOSAgentExecutor

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


@dataclass
class Worker:
    """One worker process on a queue. ``start()`` launches; ``stop()`` shuts DBOS down."""

    app: str
    settings: QueueSettings = field(default_factory=QueueSettings)
    executor_id: str | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    """Queue settings given on the command line; the rest come from the stored queue."""
    executor: DBOSAgentExecutor | None = None

    def start(self) -> None:
        from dbos import DBOS
        from dbos import error as dbos_errors

        from helix_dbos.client.launcher import launch_dbos

        # DBOS reads its executor id from $DBOS__VMID when the app module creates DBOS
        # (an ``executor_id`` in the app's own config wins): set it before the import, so
        # recovery at launch is this worker's own.
        os.environ["DBOS__VMID"] = self.executor_id or os.environ.get("DBOS__VMID") or default_executor_id()
        self.executor = load_app(self.app)
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

    def recover(self, executor_ids: Sequence[str]) -> list[str]:
        """Hand the PENDING runs of dead executors back to their queues; their workflow ids."""
        from dbos import DBOS

        # DBOS 3.4 has no public call for another executor's recovery (Conductor does it
        # for you); this one is what DBOS's own launch uses for its executor id.
        recover = getattr(DBOS, "recover_pending_workflows", None) or DBOS._recover_pending_workflows
        return [handle.get_workflow_id() for handle in recover(list(executor_ids))]

    def stop(self) -> None:
        from dbos import DBOS

        DBOS.destroy(destroy_registry=False)


def serve(worker: Worker, recover_ids: Sequence[str] = (), echo: Callable[[str], None] = print) -> None:
    """Start ``worker``, recover ``recover_ids``, then block until SIGTERM or SIGINT."""
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    worker.start()
    echo(f"worker {worker.executor_id} listening on {worker.settings.describe()}")
    if recover_ids:
        recovered = worker.recover(recover_ids)
        echo(f"recovered {len(recovered)} runs of executor {', '.join(recover_ids)}")
        for workflow_id in recovered:
            echo(f"  {workflow_id}")
    try:
        while not stop.wait(0.5):
            pass
    finally:
        echo(f"worker {worker.executor_id} stopping")
        worker.stop()
