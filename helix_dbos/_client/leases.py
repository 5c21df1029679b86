"""Worker leases: runs outlive the process that ran them, on Postgres alone.

Every process that runs helix workflows keeps a lease on its DBOS executor id in
``helix.workers``. :class:`DBOSAgentExecutor` takes it when it is constructed (after
``DBOS(config=...)``, before ``DBOS.launch()``), so nothing is needed in your app, a
``helix-dbos worker`` or ``helix-dbos serve``. A background thread with a connection of its
own then, every ``renew_sec`` seconds:

- **renews** the lease (``expires_at = now() + ttl_sec``, in the database's clock);
- **adopts** (once DBOS is launched) every lease of the same application and version that
  expired or was released: under the lease row's lock, so two survivors never adopt the
  same one, it hands that executor's PENDING runs back to their queues, where any worker
  resumes them from their last checkpoint, records which runs it adopted
  (``helix.run_adoptions``), and marks the row ``adopted``. A released lease
  is announced with NOTIFY, so it is adopted at once rather than at the next renewal;
- **releases** the lease when this process's DBOS is destroyed (your app shutting down
  calls ``DBOS.destroy()``), so the runs it left are adopted at once;
- **fences** this process when it finds its lease adopted by another (it paused for longer
  than the lease, or lost the database): it stops taking work from queues and asks the
  process to stop (SIGTERM). Its runs were handed back: DBOS refuses their checkpoints
  from here on, so each stops at its next one and goes on elsewhere.

A restart with the same executor id (a stable ``--executor-id``, a StatefulSet pod name)
takes the lease over and keeps DBOS's own recovery at launch. Two live processes never
share an executor id: the second is refused with :class:`ExecutorIdInUseError`. With DBOS
Conductor configured, Conductor recovers dead executors, and helix keeps no lease.

    >>> LeaseSettings.from_env()   # HELIX_LEASE_TTL, HELIX_LEASE_RENEW
    LeaseSettings(ttl_sec=10.0, renew_sec=2.0)
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg

from helix_dbos._client import dbos_internals
from helix_dbos._database import libpq_url
from helix_dbos.errors import ConfigurationError, DatabaseError, ExecutorIdInUseError
from helix_dbos._logs import EventLog, Level
from helix_dbos._store import tool_attempts
from helix_dbos._store import workers as store
from helix_dbos._store.retry import is_transient

TTL_ENV = "HELIX_LEASE_TTL"
RENEW_ENV = "HELIX_LEASE_RENEW"


def default_executor_id() -> str:
    """``<hostname>-<pid>``: unique per process, new at every start."""
    return f"{socket.gethostname()}-{os.getpid()}"


@dataclass(frozen=True)
class LeaseSettings:
    """How long a lease lasts without renewal, and how often it is renewed.

    A process that stops renewing (killed, frozen, cut off from the database) is adopted
    ``ttl_sec`` to ``ttl_sec + renew_sec`` seconds after its last renewal. A shorter lease
    adopts sooner and fences a process after a shorter pause.

    Attributes:
        ttl_sec: Seconds a lease lasts without renewal.
        renew_sec: Seconds between renewals; at most half of ``ttl_sec``.

    Raises:
        ConfigurationError: ``renew_sec`` is not positive, or more than half of ``ttl_sec``.
    """

    ttl_sec: float = 10.0
    renew_sec: float = 2.0

    def __post_init__(self) -> None:
        if not 0 < self.renew_sec * 2 <= self.ttl_sec:
            raise ConfigurationError(
                f"a lease must be renewed at least twice per ttl: renew_sec={self.renew_sec}, ttl_sec={self.ttl_sec}"
            )

    @classmethod
    def from_env(cls) -> LeaseSettings:
        """The settings from ``$HELIX_LEASE_TTL`` and ``$HELIX_LEASE_RENEW`` (seconds), or the defaults.

        Returns:
            The settings; ``renew_sec`` defaults to a fifth of a ``$HELIX_LEASE_TTL`` given alone.

        Raises:
            ConfigurationError: A variable is not a number, or the two do not fit together.
        """
        values: dict[str, float] = {}
        for name, key in ((TTL_ENV, "ttl_sec"), (RENEW_ENV, "renew_sec")):
            text = os.environ.get(name)
            if text:
                try:
                    values[key] = float(text)
                except ValueError:
                    raise ConfigurationError(f"${name} must be a number of seconds, not {text!r}") from None
        if "ttl_sec" in values and "renew_sec" not in values:
            values["renew_sec"] = values["ttl_sec"] / 5
        return cls(**values)


@dataclass(frozen=True)
class Adoption:
    """One lease this process adopted: whose, and the runs it handed back to their queues."""

    executor_id: str
    workflow_ids: list[str]


@dataclass(frozen=True)
class Drained:
    """What a drain did: runs that finished in the grace period, runs handed back.

    Attributes:
        finished: Runs that finished within the grace period.
        handed_back: The workflow ids handed back to their queues.
        seconds: How long the drain took.
    """

    finished: int
    handed_back: list[str]
    seconds: float


@dataclass
class WorkerLease:
    """The lease of this process's executor id, kept by a background thread.

    Made and started by :func:`keep_lease`; ``DBOSAgentExecutor`` does that for you.
    """

    database_url: str
    instance: Any
    """This process's DBOS instance (see :mod:`helix_dbos._client.dbos_internals`)."""
    settings: LeaseSettings = field(default_factory=LeaseSettings)
    log: EventLog = field(default_factory=EventLog)
    on_adopted: Callable[[Adoption], None] = lambda adoption: None
    on_fenced: Callable[[str], None] | None = None
    """Called with the adopter's id when this process lost its lease; default: stop taking
    work and send this process SIGTERM."""
    executor_id: str = ""
    token: str = field(default_factory=lambda: uuid.uuid4().hex)
    fenced_by: str | None = None
    _held: bool = False
    _queues_known: bool = False
    _draining: bool = False
    _stop: threading.Event = field(default_factory=threading.Event)
    _wake: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _conn: psycopg.Connection | None = None

    # --- the holder's side -------------------------------------------------------------

    def acquire(self) -> None:
        """Take the lease of DBOS's executor id, or raise :class:`ExecutorIdInUseError`
        when another live process holds it. Waits for launch when DBOS sets the
        application version only then.

        One transaction, atomic for a new id as for a known one: an id without a lease row
        is claimed by inserting the row (``INSERT ... ON CONFLICT DO NOTHING``), so of two
        processes starting at once with one id the primary key lets exactly one in and the
        other finds its row; an id with a row is taken over under that row's lock. A lock
        on a row that does not exist yet would lock nothing, and an advisory lock would be
        a second name for the same thing: the row itself is the lock."""
        import dbos

        if not dbos.DBOS.application_version:
            return  # taken at the first renewal after launch
        self.executor_id = dbos.DBOS.executor_id
        claim = store.LeaseClaim(
            executor_id=self.executor_id,
            application_name=dbos_internals.application_name(self.instance),
            application_version=dbos.DBOS.application_version,
            queues=dbos_internals.listening_queues(self.instance),
            host=socket.gethostname(),
            pid=os.getpid(),
            token=self.token,
            ttl_sec=self.settings.ttl_sec,
        )
        conn = self._connection()
        with conn.transaction():
            if not store.claim_new_lease(conn, claim):
                self._take_over(conn, claim)
        self._held = True
        self._queues_known = dbos_internals.is_launched(self.instance)
        self.log.info("worker.lease_acquired", executor_id=self.executor_id, ttl_sec=self.settings.ttl_sec)

    def _take_over(self, conn: psycopg.Connection, claim: store.LeaseClaim) -> None:
        """Take the lease row of an executor id that had one, under the row's lock: refused
        while a live process other than this one's predecessor holds it."""
        holder = store.get_worker(conn, claim.executor_id, lock=True)
        if holder is not None and holder.status in ("live", "draining") and not _predecessor(holder, claim):
            raise ExecutorIdInUseError(
                f"executor id {claim.executor_id!r} is held by a live process (host {holder.host}, pid {holder.pid},"
                f" seen {holder.last_seen:%H:%M:%S}): give each process its own executor id"
                " (leave executor_id unset for <hostname>-<pid>)"
            )
        store.take_lease(conn, claim)

    def start(self) -> None:
        """Keep the lease in a daemon thread until :meth:`stop` or this DBOS is destroyed."""
        self._thread = threading.Thread(target=self._run, name=f"helix-lease-{self.executor_id}", daemon=True)
        self._thread.start()

    def drain(self) -> None:
        """Show the lease as ``draining`` (this process finishes its runs and takes no new ones)."""
        self._draining = True
        self._wake.set()

    def release(self) -> bool:
        """Release the lease now: live processes of the application adopt what this one
        left at once. False when it was not held (never taken, or adopted already)."""
        self.stop()
        if not self._held:
            return False
        self._held = False
        released = self._with_retry(self._release)
        self.log.info("worker.lease_released", executor_id=self.executor_id)
        return released

    def _release(self, conn: psycopg.Connection) -> bool:
        """Release the lease; the tool calls this process still runs were handed back, not
        lost (:mod:`helix_dbos._store.tool_attempts`)."""
        with conn.transaction():
            if not store.release_lease(conn, self.executor_id, self.token):
                return False
            tool_attempts.forget_handed_back(conn)
            return True

    def stop(self) -> None:
        """Stop the thread without releasing (the lease then expires on its own)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=self.settings.renew_sec + 10)

    # --- the thread ----------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                if self._tick():
                    return
            except Exception as exc:
                level: Level = "warning" if is_transient(exc) else "error"
                self.log.emit(level, "worker.lease_failed", {"executor_id": self.executor_id, "error": str(exc)},
                              exc_info=level == "error")
                self._close()
            self._wait(self.settings.renew_sec)

    def _tick(self) -> bool:
        """One renewal (and adoption round); True when the thread is done."""
        if dbos_internals.configured_dbos() is not self.instance or dbos_internals.was_destroyed(self.instance):
            self.release()
            return True
        if not self._held:
            self.acquire()
            return False
        launched = dbos_internals.is_launched(self.instance)
        conn = self._connection()
        state = "draining" if self._draining else None
        if not store.renew_lease(conn, self.executor_id, self.token, self.settings.ttl_sec, state):
            self._fenced(conn)
            return True
        if launched and not self._queues_known:
            store.set_queues(conn, self.executor_id, dbos_internals.listening_queues(self.instance))
            self._queues_known = True
        if launched and not self._draining:
            self._adopt_all(conn)
        return False

    def _adopt_all(self, conn: psycopg.Connection) -> None:
        import dbos

        name = dbos_internals.application_name(self.instance)
        while not self._stop.is_set():
            with conn.transaction():
                dead = store.lock_adoptable(conn, name, dbos.DBOS.application_version, self.executor_id)
                if dead is None:
                    return
                handed_back = dbos_internals.recover_executors([dead])
                store.record_run_adoptions(conn, dead, self.executor_id, handed_back)
                store.mark_adopted(conn, dead, self.executor_id, len(handed_back))
            self.log.info("worker.adopted", executor_id=self.executor_id, adopted=dead, runs=len(handed_back))
            self.on_adopted(Adoption(dead, handed_back))

    def _fenced(self, conn: psycopg.Connection) -> None:
        holder = store.get_worker(conn, self.executor_id)
        self.fenced_by = (holder.adopted_by if holder is not None and holder.adopted_by else None) or "another process"
        self._held = False
        self.log.error("worker.fenced", executor_id=self.executor_id, adopted_by=self.fenced_by)
        dbos_internals.stop_claiming(self.instance)
        if self.on_fenced is not None:
            self.on_fenced(self.fenced_by)
        else:
            os.kill(os.getpid(), signal.SIGTERM)

    def _wait(self, seconds: float) -> None:
        """Sleep ``seconds``, or less when a lease is released (NOTIFY), on :meth:`drain`
        or :meth:`stop`."""
        deadline = time.monotonic() + seconds
        while not self._stop.is_set():
            if self._wake.is_set():
                self._wake.clear()
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            conn = self._conn
            if conn is None or conn.closed:
                self._wake.wait(min(remaining, 0.5))
                continue
            try:
                if any(True for _ in conn.notifies(timeout=min(remaining, 0.5), stop_after=1)):
                    return
            except psycopg.Error:
                self._close()

    # --- the connection --------------------------------------------------------------------

    def _connection(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(libpq_url(self.database_url), autocommit=True, connect_timeout=10)
            self._conn.execute(f"LISTEN {store.NOTIFY_CHANNEL}")
        return self._conn

    def _close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            finally:
                self._conn = None

    def _with_retry(self, fn: Callable[[psycopg.Connection], bool], attempts: int = 3) -> bool:
        for attempt in range(attempts):
            try:
                return fn(self._connection())
            except psycopg.Error as exc:
                self._close()
                if attempt == attempts - 1 or not is_transient(exc):
                    self.log.warning("worker.lease_failed", executor_id=self.executor_id, error=str(exc))
                    return False
        return False


_current: WorkerLease | None = None


def keep_lease(database_url: str, log: EventLog | None = None, settings: LeaseSettings | None = None) -> WorkerLease | None:
    """Take and keep the lease of this process's DBOS executor id (replacing a lease this
    process kept before); None without a configured DBOS or with Conductor.

    Raises :class:`ExecutorIdInUseError` when another live process holds the id.
    """
    global _current
    instance = dbos_internals.configured_dbos()
    if instance is None or dbos_internals.uses_conductor(instance):
        return None
    if _current is not None:
        _current.stop()
    lease = WorkerLease(database_url, instance, settings or LeaseSettings.from_env(), log or EventLog())
    try:
        lease.acquire()
    except psycopg.Error as exc:
        raise DatabaseError(f"cannot take the worker lease of executor {lease.executor_id!r}: {exc}") from exc
    lease.start()
    _current = lease
    return lease


def current_lease() -> WorkerLease | None:
    """The lease this process keeps, if any."""
    return _current


def _predecessor(holder: store.WorkerRecord, claim: store.LeaseClaim) -> bool:
    """Whether ``holder`` is this process, or an earlier process on this host that is gone."""
    return holder.host == claim.host and (holder.pid == claim.pid or not _alive(holder.pid))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
