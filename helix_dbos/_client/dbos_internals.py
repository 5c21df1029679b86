"""The few things helix needs of DBOS that DBOS has no public API for, in one place.

Worker leases (:mod:`helix_dbos._client.leases`) must know whether this process's DBOS is
configured or launched, and under which application name, whether Conductor recovers its
workflows, how to stop taking work from queues without shutting DBOS down, and how to hand
another executor's PENDING workflows back to their queues. DBOS 3.4 does all of these for
its own launch, drain and Conductor, but publishes none of them. Everything here reads or
calls DBOS's internals, so ``tests/workers/test_dbos_internals.py`` checks each of them
against the installed DBOS: an upgrade that changes one fails there, by name, instead of
stranding runs.

    >>> instance = configured_dbos()          # doctest: +SKIP
    >>> recover_executors(["host-a-4242"])    # doctest: +SKIP
    ['helix:s-1:run:1', ...]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def configured_dbos() -> Any | None:
    """This process's ``DBOS`` instance (made by ``DBOS(config=...)``), or None."""
    from dbos import _dbos as dbos_module

    return dbos_module._dbos_global_instance


def is_launched(instance: Any) -> bool:
    """Whether ``instance`` is launched and not yet destroyed."""
    return bool(getattr(instance, "_launched", False)) and bool(getattr(instance, "_initialized", False))


def was_destroyed(instance: Any) -> bool:
    """Whether ``instance`` was launched and then destroyed (``DBOS.destroy()``)."""
    return bool(getattr(instance, "_launched", False)) and not bool(getattr(instance, "_initialized", False))


def listening_queues(instance: Any) -> list[str] | None:
    """The queues ``DBOS.listen_queues`` limited ``instance`` to; None: every queue."""
    queues = instance._listening_queues
    return None if queues is None else list(queues)


def application_name(instance: Any) -> str:
    """The application name of ``instance``'s config (DBOS publishes it only after launch)."""
    return str(instance._config["name"])


def uses_conductor(instance: Any) -> bool:
    """Whether DBOS Conductor (or DBOS Cloud) recovers this process's workflows."""
    from dbos._utils import GlobalParams

    return getattr(instance, "conductor_key", None) is not None or bool(GlobalParams.dbos_cloud)


def stop_claiming(instance: Any) -> None:
    """Stop taking work: DBOS's queue threads (and its schedulers) end, as the first thing
    ``DBOS.destroy()`` does, while the workflows already running go on and can still
    checkpoint. Idempotent."""
    for event in instance.background_thread_stop_events:
        event.set()


def recover_executors(executor_ids: Sequence[str]) -> list[str]:
    """Hand the PENDING workflows of ``executor_ids`` (of this process's application and
    version) back to their queues (a workflow started outside a queue goes to DBOS's
    internal queue, which every process works on); their workflow ids.

    DBOS re-enqueues a workflow only while it is still PENDING under one of those ids, so
    a second call, or a call racing a live executor's claim, changes nothing. Once
    re-enqueued, a workflow's previous execution can no longer checkpoint: DBOS refuses a
    step's output from an execution that no longer owns the workflow.
    """
    from dbos import DBOS

    handles = DBOS._recover_pending_workflows(list(executor_ids))
    return [handle.get_workflow_id() for handle in handles]
