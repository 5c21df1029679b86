"""An app process like a web app's (``DBOS.launch()`` in the app, runs started in-process,
``helix_dbos.shutdown()`` on SIGTERM as a shutdown hook would), on ``tests/scaleout/scale_app.py``.

``python app_process.py N``: starts sessions ``app-<pid>-0..N-1`` in-process (no queue),
prints ``started <executor id>`` and serves until SIGTERM. ``N`` = 0: a peer that only runs.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

from dbos import DBOS

import scale_app
from helix_dbos import shutdown

stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
DBOS.launch()
for i in range(int(sys.argv[1])):
    scale_app.executor.execute(scale_app.scale_agent, f"app-{os.getpid()}-{i}", session_id=f"app-{os.getpid()}-{i}")
print(f"started {DBOS.executor_id}", flush=True)
stop.wait()
shutdown(drain_timeout=0)
print("stopped", flush=True)
os._exit(0)
