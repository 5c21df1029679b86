"""A user's own traced program (``python obs_caller.py``, the environment of ``obs_app.py``
with ``$HELIX_OBS_OTLP`` and ``$HELIX_OBS_DBOS_TRACING``): inside its span ``user-request``
it runs ``obs-assistant`` ("delegate", session ``$HELIX_OBS_SESSION``-1) from plain code,
then from its own DBOS workflow ``user_flow`` ("hello", session ``$HELIX_OBS_SESSION``-2),
then through a ``RunEnqueuer`` (a DBOSClient: "hello", session ``$HELIX_OBS_SESSION``-3).
The runs go to the queue, so a worker runs them. Prints the trace id of ``user-request``."""

from __future__ import annotations

import os

from dbos import DBOS
from opentelemetry import trace

from helix_dbos import RunEnqueuer
from obs_app import URL, executor

SESSION = os.environ["HELIX_OBS_SESSION"]


@DBOS.workflow(name="user_flow")
def user_flow(session_id: str) -> str:
    return str(executor.execute("obs-assistant", "hello", session_id=session_id).result().output)


DBOS.launch()
with trace.get_tracer("obs-caller").start_as_current_span("user-request") as span:
    executor.execute("obs-assistant", "delegate", session_id=f"{SESSION}-1").result()
    user_flow(f"{SESSION}-2")
    enqueuer = RunEnqueuer(URL, queue="agents")
    enqueuer.result(enqueuer.enqueue("obs-assistant", "hello", session_id=f"{SESSION}-3"), timeout=120)
    enqueuer.close()
print(f"trace {span.get_span_context().trace_id:032x}", flush=True)
trace.get_tracer_provider().shutdown()  # type: ignore[attr-defined]
DBOS.destroy()
