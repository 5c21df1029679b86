"""Transient database failures: which errors are worth retrying, and a bounded retry.

A connection killed by the server, a restarting Postgres, a pool handing out a dead
connection: the same statement, run again on a new connection, succeeds. Statements that
are retried this way must be safe to repeat (reads, or writes that are idempotent)::

    messages = retry_transient(lambda: load(conn_factory))

A caller of the library gets :func:`retry_or_unavailable`: the same retries, and a
:class:`~helix_dbos.errors.DatabaseUnavailableError` instead of the driver's error when
they run out::

    row = retry_or_unavailable(lambda: read(engine), "reading session 's1'")

DBOS retries its own statements on errors SQLAlchemy flags as disconnects, and psycopg
reports a failed connect in words SQLAlchemy does not know ("connection is bad: ... No
such file or directory" while a Postgres restarts behind a Unix socket).
:func:`recognize_lost_connections` teaches every engine in the process to flag them::

    recognize_lost_connections()   # the executor and the operator client call it
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import psycopg
from sqlalchemy import event
from sqlalchemy.engine import Engine, ExceptionContext
from sqlalchemy.exc import DBAPIError

from helix_dbos._error_text import first_line
from helix_dbos.errors import DatabaseUnavailableError

T = TypeVar("T")

logger = logging.getLogger("helix_dbos")

_TRANSIENT_SQLSTATE_CLASSES = ("08", "53", "57P")
"""Connection exceptions, insufficient resources, operator intervention (a terminated
backend, a shutting-down server)."""


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` is a connection-level failure that a retry on a new connection cures."""
    if isinstance(exc, DBAPIError):
        if exc.connection_invalidated:
            return True
        exc = exc.orig if exc.orig is not None else exc
    if isinstance(exc, psycopg.OperationalError):
        sqlstate = exc.sqlstate or ""
        if sqlstate.startswith(_TRANSIENT_SQLSTATE_CLASSES):
            return True
        text = str(exc)
        return "connection" in text or "server closed" in text or "terminating" in text
    return isinstance(exc, psycopg.InterfaceError)


class Retries:
    """The backoff of :func:`retry_transient`, for a loop of either kind (sync or async)::

        retries = Retries()
        while True:
            try:
                return fn()
            except Exception as exc:
                time.sleep(retries.wait_after(exc))   # raises exc when not to retry
    """

    def __init__(self, attempts: int = 30, first_wait: float = 0.05, max_wait: float = 2.0) -> None:
        self.attempts = attempts
        self.max_wait = max_wait
        self._attempt = 0
        self._wait = first_wait

    def wait_after(self, exc: Exception) -> float:
        """Seconds to wait before the next attempt; raises ``exc`` when it is not transient
        or was the last attempt's."""
        self._attempt += 1
        if self._attempt == self.attempts or not is_transient(exc):
            raise exc
        logger.warning("transient database error (attempt %d of %d), retrying: %s", self._attempt, self.attempts,
                       first_line(exc))
        wait, self._wait = self._wait, min(self._wait * 2, self.max_wait)
        return wait


def retry_transient(fn: Callable[[], T], *, attempts: int = 30, first_wait: float = 0.05, max_wait: float = 2.0) -> T:
    """``fn()``, run again (with backoff up to ``max_wait`` seconds) while it fails with a
    transient error; any other error, or the last attempt's, propagates."""
    retries = Retries(attempts, first_wait, max_wait)
    while True:
        try:
            return fn()
        except Exception as exc:
            time.sleep(retries.wait_after(exc))


def retry_or_unavailable(fn: Callable[[], T], what: str) -> T:
    """``retry_transient(fn)`` for a caller of the library: when the connection still fails
    on the last attempt, :class:`DatabaseUnavailableError` saying that ``what`` (``"starting
    run 1 of session 's1'"``) could not be done, with the driver's error as its cause."""
    try:
        return retry_transient(fn)
    except Exception as exc:
        if not is_transient(exc):
            raise
        raise _unavailable(exc, what) from exc


async def retry_or_unavailable_async(fn: Callable[[], Awaitable[T]], what: str) -> T:
    """:func:`retry_or_unavailable` for a coroutine function: ``await fn()``, with the same
    retries (waiting with ``asyncio.sleep``) and the same error when they run out."""
    retries = Retries()
    try:
        while True:
            try:
                return await fn()
            except Exception as exc:
                await asyncio.sleep(retries.wait_after(exc))
    except Exception as exc:
        if not is_transient(exc):
            raise
        raise _unavailable(exc, what) from exc


def _unavailable(exc: Exception, what: str) -> DatabaseUnavailableError:
    """The error saying that ``what`` failed on the transient ``exc``."""
    return DatabaseUnavailableError(f"the database stayed unreachable while {what}: {first_line(exc)}")


def recognize_lost_connections() -> None:
    """Flag every transient connection failure as a disconnect on all SQLAlchemy engines
    (DBOS's included), so that whoever retries disconnects retries these too. Idempotent."""
    if not event.contains(Engine, "handle_error", _flag_disconnect):
        event.listen(Engine, "handle_error", _flag_disconnect)


def _flag_disconnect(context: ExceptionContext) -> None:
    if not context.is_disconnect and is_transient(context.original_exception):
        context.is_disconnect = True
