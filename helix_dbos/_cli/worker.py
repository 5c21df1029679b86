"""``helix-dbos worker``, ``helix-dbos recover`` and ``helix-dbos serve``: click shells over
:mod:`helix_dbos._client.worker` and :mod:`helix_dbos.server.serve`."""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable
from typing import Any, NoReturn

import click

from helix_dbos._client.queues import DEFAULT_QUEUE, QueueSettings, RateLimit
from helix_dbos._client.worker import DEFAULT_METRICS_HOST, Worker, serve
from helix_dbos.errors import HelixError


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
        click.option("--drain-timeout", type=click.FloatRange(min=0), default=30.0, show_default=True,
                     help="On SIGTERM, seconds running runs get to finish before they are handed back."),
        click.option("--metrics-port", type=click.IntRange(min=0, max=65535), default=None,
                     help="Serve Prometheus metrics on this port at /metrics (needs helix-dbos[metrics])."),
        click.option("--metrics-host", default=DEFAULT_METRICS_HOST, show_default=True,
                     help="The address --metrics-port binds (/metrics is unauthenticated: 127.0.0.1 keeps it local)."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _make_worker(app: str, queue: str, executor_id: str | None, metrics_port: int | None = None,
                 metrics_host: str = DEFAULT_METRICS_HOST, **given: Any) -> Worker:
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
    return Worker(app=app, settings=settings, executor_id=executor_id, overrides=overrides, metrics_port=metrics_port,
                  metrics_host=metrics_host)


@click.command("worker")
@_worker_options
@click.option("--executor-id", "executor_id", default=None, help="This worker's DBOS executor id (default: hostname-pid).")
def worker_command(app: str, queue: str, executor_id: str | None, drain_timeout: float, **given: Any) -> None:
    """Run agent sessions from a queue until SIGTERM/SIGINT, then drain.

    Adopts the runs of dead or drained workers of its application version. Exits 0 after
    a drain, 3 when another worker adopted its runs (it was paused or cut off for longer
    than its lease), 1 on an error.
    """
    _exit_with(lambda: serve(_make_worker(app, queue, executor_id, **given), echo=_echo, drain_timeout=drain_timeout))


def _exit_with(work: Callable[[], int]) -> NoReturn:
    """Run ``work`` and exit with its status, or 1 after an error: a :class:`HelixError` as
    one line, anything else with its traceback (a usage error is click's to report). The
    process exits even when threads are left (see :func:`_exit`)."""
    try:
        code = work()
    except click.ClickException:
        raise
    except HelixError as exc:
        click.echo(f"error: {exc}", err=True)
        code = 1
    except Exception:
        traceback.print_exc()
        code = 1
    _exit(code)


def _exit(code: int) -> NoReturn:
    """Exit now: a run parked for days, or one handed back while its tool still runs, must
    not hold the process (Python would wait for their threads)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


@click.command("recover")
@_worker_options
@click.option("--executor", "dead", required=True, multiple=True, help="Executor id of a dead worker (repeatable).")
@click.option("--executor-id", "executor_id", default=None, help="This process's own executor id (default: hostname-pid).")
def recover_command(app: str, queue: str, dead: tuple[str, ...], executor_id: str | None, drain_timeout: float,
                    **given: Any) -> None:
    """Recover the PENDING runs of dead workers, then keep working as a worker.

    The runs go back to their queue and resume from their last checkpoint on whichever
    worker claims them (this one included). Stop it with SIGTERM like any worker. Workers
    adopt each other's runs by themselves; this is for executors that kept no lease.
    """
    def recover_and_serve() -> int:
        worker = _make_worker(app, queue, executor_id, **given)
        if worker.executor_id in dead:
            raise HelixError("--executor-id must differ from the dead executor's id")
        return serve(worker, recover_ids=dead, echo=_echo, drain_timeout=drain_timeout)

    _exit_with(recover_and_serve)


@click.command("serve")
@click.option("--app", "app", required=True, help="module:attr of your DBOSAgentExecutor (DBOS not launched).")
@click.option("--auth", "auth", default=None, help="module:function, the authenticate hook (request -> principal | None).")
@click.option("--authorize", "authorize", default=None,
              help="module:function, the authorize hook (principal, action, session -> bool); default: owners only.")
@click.option("--allow-unauthenticated", is_flag=True, help="Serve without authentication (development only).")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True, type=click.IntRange(min=0, max=65535))
@click.option("--worker/--no-worker", default=True, show_default=True, help="Also run the agents (a queue worker).")
@click.option("--queue", default=DEFAULT_QUEUE, show_default=True, help="The queue the agents' runs go to.")
@click.option("--executor-id", "executor_id", default=None, help="This process's DBOS executor id (default: hostname-pid).")
@click.option("--drain-timeout", type=click.FloatRange(min=0), default=30.0, show_default=True,
              help="On SIGTERM, seconds running runs get to finish before they are handed back.")
def serve_command(app: str, auth: str | None, authorize: str | None, allow_unauthenticated: bool, host: str, port: int, worker: bool,
                  queue: str, executor_id: str | None, drain_timeout: float) -> None:
    """Serve the agents over HTTP (the executor routes and the console) until SIGTERM/SIGINT, then drain."""
    from helix_dbos.server.serve import serve as serve_agents

    def serve_until_stopped() -> int:
        if auth is None and not allow_unauthenticated:
            raise HelixError("give --auth module:function, or --allow-unauthenticated to serve without authentication")
        serve_agents(app, host=host, port=port, auth=auth, authorize=authorize, allow_unauthenticated=allow_unauthenticated,
                     worker=worker, queue=queue, executor_id=executor_id, echo=_echo, drain_timeout=drain_timeout)
        return 0

    _exit_with(serve_until_stopped)
