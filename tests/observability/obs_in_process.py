"""A user's own traced program that runs agents in its own process, no queue and no
worker (``python obs_in_process.py``, the environment of ``obs_app.py`` with
``$HELIX_OBS_OTLP`` and optionally ``$HELIX_OBS_DBOS_TRACING``): inside its span
``user-request`` it runs ``obs-assistant`` with ``executor.execute`` ("delegate", session
``$HELIX_OBS_SESSION``-sync) and ``executor.execute_async`` ("tools", session
``$HELIX_OBS_SESSION``-async). Prints the trace id of ``user-request``.

``python obs_in_process.py slow``: inside ``user-request`` it prints ``span <trace id>
<span id>`` and runs "slow" (session ``$HELIX_OBS_SESSION``-slow), for the test to SIGKILL
it in the slow tool and let a worker recover the run."""

from __future__ import annotations

import asyncio
import os
import sys

from dbos import DBOS
from opentelemetry import trace

from obs_app import executor

SESSION = os.environ["HELIX_OBS_SESSION"]


async def run_async() -> None:
    handle = await executor.execute_async("obs-assistant", "tools", session_id=f"{SESSION}-async")
    await handle.result_async()


executor.default_queue = None  # start each run in this process
DBOS.launch()
with trace.get_tracer("obs-caller").start_as_current_span("user-request") as span:
    if sys.argv[1:] == ["slow"]:
        print(f"span {span.get_span_context().trace_id:032x} {span.get_span_context().span_id:016x}", flush=True)
        executor.execute("obs-assistant", "slow", session_id=f"{SESSION}-slow").result()
    executor.execute("obs-assistant", "delegate", session_id=f"{SESSION}-sync").result()
    asyncio.run(run_async())
print(f"trace {span.get_span_context().trace_id:032x}", flush=True)
trace.get_tracer_provider().shutdown()  # type: ignore[attr-defined]
DBOS.destroy()
