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

import click

from helix_dbos.errors import HelixError
from helix_dbos.runtime.queues import DEFAULT_QUEUE, QueueSettings, RateLimit, register_queue, stored_settings

if TYPE_CHECKING:
    from helix_dbos.runtime.executor import DBOSAgentExecutor


def default_executor_id() -> str:
    """``<hostname>-<pid>``: unique per worker process."""
    return f"{socket.gethostname()}-{os.getpid()}"


def load_app(spec: str) -> DBOSAgentExecutor:
    """Import ``module[:attr]`` and return its executor (``attr`` may be a factory).

    Without ``attr``, the executor the module created is used.
    """
    from helix_dbos.runtime import workflow
    from helix_dbos.runtime.executor import DBOSAgentExecutor

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
        found = workflow.current_executor()
    if not isinstance(found, DBOSAgentExecutor):
        raise HelixError(f"--app {spec!r} is a {type(found).__name__}, not a DBOSAgentExecutor")
    return found


def _dbos_instance() -> Any:
    from dbos import _dbos

    instance = _dbos._dbos_global_instance
    if instance is None:
        raise HelixError("the app module must create DBOS(config=...) (and must not launch it)")
    if instance._launched:
        raise HelixError("the app module launched DBOS; leave DBOS.launch() to the worker")
    return instance


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
        from dbos._error import DBOSException
        from dbos._utils import GlobalParams

        self.executor = load_app(self.app)
        _dbos_instance()
        # DBOS read its executor id from the config (or $DBOS__VMID, else "local") when it
        # was created; set it before launch so recovery at launch is this worker's own.
        if self.executor_id:
            GlobalParams.executor_id = self.executor_id
        elif GlobalParams.executor_id in ("", "local"):
            GlobalParams.executor_id = default_executor_id()
        try:
            DBOS.listen_queues([self.settings.name])
        except DBOSException:
            pass  # the app chose its queues itself
        DBOS.launch()
        self.executor_id = DBOS.executor_id
        stored = stored_settings(self.settings.name)
        if stored is not None:
            self.settings = stored.model_copy(update=self.overrides)
            QueueSettings.model_validate(self.settings.model_dump())
        register_queue(self.settings)

    def recover(self, executor_ids: Sequence[str]) -> list[str]:
        """Hand the PENDING runs of dead executors back to their queues; their workflow ids."""
        from dbos import DBOS

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


# --- click commands (attached to ``helix-dbos`` in cli.py) ------------------------------------


def _echo(line: str) -> None:
    click.echo(line)
    sys.stdout.flush()  # a supervisor (or a test) reads these lines as they come


def _rate(ctx: Any, param: Any, value: str | None) -> RateLimit | None:
    if value is None:
        return None
    try:
        return RateLimit.parse(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def _worker_options(func: Any) -> Any:
    options = [
        click.option("--app", "app", required=True, help="module:attr of your DBOSAgentExecutor (DBOS not launched)."),
        click.option("--queue", "queue", default=DEFAULT_QUEUE, show_default=True, help="Queue to work on."),
        click.option("--concurrency", type=click.IntRange(min=1), default=None, help="Runs at once per worker."),
        click.option("--global-concurrency", type=click.IntRange(min=1), default=None, help="Runs at once, all workers."),
        click.option("--rate-limit", callback=_rate, default=None, help="Run starts per period, all workers: N/SECONDS."),
        click.option("--polling-interval", type=click.FloatRange(min=0.001), default=None, help="Seconds between queue polls."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _make_worker(app: str, queue: str, executor_id: str | None, **given: Any) -> Worker:
    overrides = {
        key: value
        for key, value in {
            "worker_concurrency": given.get("concurrency"),
            "global_concurrency": given.get("global_concurrency"),
            "rate_limit": given.get("rate_limit"),
            "polling_interval_sec": given.get("polling_interval"),
        }.items()
        if value is not None
    }
    try:
        settings = QueueSettings(name=queue, **overrides)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    return Worker(app=app, settings=settings, executor_id=executor_id, overrides=overrides)


@click.command("worker")
@_worker_options
@click.option("--executor-id", "executor_id", default=None, help="This worker's DBOS executor id (default: hostname-pid).")
def worker_command(app: str, queue: str, executor_id: str | None, **given: Any) -> None:
    """Run agent sessions from a queue until SIGTERM/SIGINT."""
    try:
        serve(_make_worker(app, queue, executor_id, **given), echo=_echo)
    except HelixError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)


@click.command("recover")
@_worker_options
@click.option("--executor", "dead", required=True, multiple=True, help="Executor id of a dead worker (repeatable).")
@click.option("--executor-id", "executor_id", default=None, help="This process's own executor id (default: hostname-pid).")
def recover_command(app: str, queue: str, dead: tuple[str, ...], executor_id: str | None, **given: Any) -> None:
    """Recover the PENDING runs of dead workers, then keep working as a worker.

    The runs go back to their queue and resume from their last checkpoint on whichever
    worker claims them (this one included). Stop it with SIGTERM like any worker.
    """
    try:
        worker = _make_worker(app, queue, executor_id, **given)
        if worker.executor_id in dead:
            raise HelixError("--executor-id must differ from the dead executor's id")
        serve(worker, recover_ids=dead, echo=_echo)
    except HelixError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
