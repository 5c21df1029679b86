"""A DBOS process for ``test_dbos_internals.py``: ``python internals_probe.py URL ROLE``.

``start``: starts ``probe_workflow`` in-process, prints its id once its first step ran,
then waits (the test SIGKILLs it). ``recover EXECUTOR``: with another executor id, hands
that executor's PENDING workflows back, prints their ids, sends the workflow its message
and prints its result. ``claiming``: checks that after ``stop_claiming`` a queued
workflow is not dequeued, and that ``was_destroyed`` follows ``DBOS.destroy()``.
Each prints one JSON line per fact.
"""

from __future__ import annotations

import json
import sys
import time

from dbos import DBOS

from helix_dbos._client import dbos_internals
from helix_dbos._client.launcher import dbos_config

URL, ROLE = sys.argv[1], sys.argv[2]


def say(**facts: object) -> None:
    print(json.dumps(facts), flush=True)


@DBOS.step()
def first_step() -> str:
    return DBOS.executor_id


@DBOS.workflow()
def probe_workflow() -> str:
    ran_on = first_step()
    message = DBOS.recv("go", timeout_seconds=60)
    return f"{ran_on}:{message}"


@DBOS.workflow()
def quick_workflow() -> str:
    return "ran"


executor_id = {"start": "probe-first"}.get(ROLE, f"probe-{ROLE}")
DBOS(config=dbos_config(URL, name="helix-probe", executor_id=executor_id))
instance = dbos_internals.configured_dbos()
say(configured=instance is not None, launched_before=dbos_internals.is_launched(instance),
    name=dbos_internals.application_name(instance))
if ROLE == "claiming":
    DBOS.listen_queues(["probe-queue"])
DBOS.launch()
queue = DBOS.register_queue("probe-queue", polling_interval_sec=0.05)
say(launched=dbos_internals.is_launched(instance), conductor=dbos_internals.uses_conductor(instance),
    queues=dbos_internals.listening_queues(instance))

if ROLE == "start":
    handle = DBOS.start_workflow(probe_workflow)
    while not DBOS.list_workflow_steps(handle.workflow_id):
        time.sleep(0.05)
    say(started=handle.workflow_id)
    time.sleep(600)
elif ROLE == "recover":
    recovered = dbos_internals.recover_executors([sys.argv[3]])
    say(recovered=recovered)
    for workflow_id in recovered:
        DBOS.send(workflow_id, "hello", "go")
        say(result=DBOS.retrieve_workflow(workflow_id).get_result())
elif ROLE == "claiming":
    say(before=queue.enqueue(quick_workflow).get_result())
    dbos_internals.stop_claiming(instance)
    time.sleep(1.5)  # the queue threads notice their stop event
    handle = queue.enqueue(quick_workflow)
    time.sleep(2)
    say(after_stop=handle.get_status().status)
    say(destroyed_before=dbos_internals.was_destroyed(instance))
    DBOS.destroy()
    say(destroyed_after=dbos_internals.was_destroyed(instance), configured_after=dbos_internals.configured_dbos() is None)
