"""Where the store's psycopg connections come from: helix's own pools, and the connection
beneath a DBOS datasource transaction.

Pooled connections are in autocommit: a read is one round trip, and statements that go
together run in ``with conn.transaction():``::

    >>> pool = create_pool("postgresql://postgres@127.0.0.1:5432/app")        # doctest: +SKIP
    >>> with pool.connection() as conn, conn.transaction():                  # doctest: +SKIP
    ...     writes.set_status(conn, "s1", "idle")
    >>> pool.close()                                                          # doctest: +SKIP

A DBOS datasource transaction runs on DBOS's SQLAlchemy session; its body reaches the same
transaction's psycopg connection with :func:`transaction_connection`, which also hands a
failed statement's error back to DBOS in the form DBOS retries (a lost connection);
:func:`datasource_transaction` registers a body that takes it::

    def _set_idle(conn: Connection[Any], session_id: str) -> None:
        writes.set_status(conn, session_id, "idle")

    set_idle = datasource_transaction(datasource, "set_idle")(_set_idle)
    set_idle("s1")
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Concatenate, ParamSpec, TypeVar

import psycopg
import sqlalchemy as sa
from psycopg import Connection
from dbos import SQLAlchemyDatasource
from psycopg_pool import ConnectionPool

from helix_dbos._database import libpq_url
from helix_dbos._store.retry import is_transient

P = ParamSpec("P")
R = TypeVar("R")

Pool = ConnectionPool[Connection[Any]]
"""A pool of autocommit psycopg connections."""

CHECKS = 3
"""How many connections a :class:`CheckedPool` tries, each checked, before it raises the
last one's error."""


class CheckedPool(ConnectionPool[Connection[Any]]):
    """A pool that checks each connection as it hands it out (one round trip, like
    SQLAlchemy's ``pool_pre_ping``), so a restarted server is survived. A connection found
    lost is discarded, and the pool checks its other idle connections (what lost one, a
    restart or an operator terminating backends, most likely lost them all) before it
    hands out another at once; after :data:`CHECKS` lost ones it raises the last one's
    error. (psycopg_pool's own ``check=`` waits 1 s, then 2 s, 4 s ... between tries, and
    a server that keeps dropping idle connections outlasts it.)"""

    def getconn(self, timeout: float | None = None) -> Connection[Any]:
        checked = 1
        while True:
            conn = super().getconn(timeout)
            try:
                self.check_connection(conn)
            except psycopg.Error:
                self.putconn(conn)
                if checked == CHECKS:
                    raise
                checked += 1
                self.check()
            else:
                return conn


def create_pool(url: str, *, max_size: int = 10, name: str = "helix") -> Pool:
    """A :class:`CheckedPool` for ``url``. Connections are opened when needed and closed
    after an idle minute; :meth:`~Pool.close` closes the rest."""
    return CheckedPool(
        libpq_url(url), min_size=0, max_size=max_size, max_idle=60, open=True, name=name, num_workers=1,
        kwargs={"autocommit": True},
    )


class StatementPool(ConnectionPool[Connection[Any]]):
    """A pool for single statements that commit on their own and that the caller runs
    again on a connection fault (``store.retry.retry_transient``): no check before each
    use, so a statement is one round trip. A statement that fails on a lost connection
    has the pool check its idle connections before the retry takes one: what lost one
    (a restarted server, an operator terminating backends) most likely lost them all."""

    @contextmanager
    def connection(self, timeout: float | None = None) -> Iterator[Connection[Any]]:
        try:
            with super().connection(timeout) as conn:
                yield conn
        except psycopg.Error as exc:
            if is_transient(exc):
                self.check()
            raise


def create_statement_pool(url: str) -> StatementPool:
    """A :class:`StatementPool` for ``url``, connections opened when needed."""
    return StatementPool(
        libpq_url(url), min_size=0, max_size=20, max_idle=60, open=True, name="helix-statements", num_workers=1,
        kwargs={"autocommit": True},
    )


@contextmanager
def transaction_connection(session_connection: sa.Connection) -> Iterator[Connection[Any]]:
    """The psycopg connection of a DBOS datasource transaction (``session_connection`` is
    its ``sql_session().connection()``). A statement that fails on a lost connection is
    raised as SQLAlchemy's disconnect error, with the connection invalidated, which DBOS
    retries the transaction on; any other error propagates as psycopg raised it."""
    driver = session_connection.connection.driver_connection
    assert driver is not None, "a connection in a transaction has its driver's"
    connection: Connection[Any] = driver
    try:
        yield connection
    except psycopg.Error as exc:
        if not is_transient(exc):
            raise
        session_connection.invalidate(exc)
        raise sa.exc.DBAPIError.instance(None, None, exc, psycopg.Error, connection_invalidated=True) from exc



def datasource_transaction(
    datasource: SQLAlchemyDatasource, name: str
) -> Callable[[Callable[Concatenate[Connection[Any], P], R]], Callable[P, R]]:
    """A decorator that registers its function as the body of the DBOS datasource
    transaction ``name`` (READ COMMITTED), called with the transaction's psycopg
    connection (:func:`transaction_connection`) before its own arguments::

        self.begin_run = datasource_transaction(datasource, "helix_begin_run")(self._begin_run)
        self.begin_run(request, state)      # self._begin_run(conn, request, state), checkpointed
    """

    def register(body: Callable[Concatenate[Connection[Any], P], R]) -> Callable[P, R]:
        def run(*args: P.args, **kwargs: P.kwargs) -> R:
            with transaction_connection(datasource.sql_session().connection()) as conn:
                return body(conn, *args, **kwargs)

        return datasource.transaction(name=name, isolation_level="READ COMMITTED")(run)

    return register
