"""``helix-dbos worker`` logs to stderr by default: its lifecycle at INFO (lease taken,
lease released) and every run that fails at ERROR, one line each, while its stdout keeps
its lifecycle lines for supervisors. ``$HELIX_LOG_LEVEL`` sets the level. The library
alone stays silent (``tests/runtime/test_logging.py``)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

from helix_dbos import RunEnqueuer
from helix_dbos._store.migrations import migrate

CLI = Path(sys.executable).parent / "helix-dbos"
STAMP = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}"

APP = textwrap.dedent(
    '''
    """A worker app whose model refuses every call, so every run fails."""
    import os

    from dbos import DBOS
    from helix_dbos import DBOSAgentExecutor, MockLLMAdapter, dbos_config, define_agent
    from helix_dbos.llm import PermanentLLMError

    URL = os.environ["HELIX_DATABASE_URL"]


    def refuse(messages, tools):
        raise PermanentLLMError("the model refused: 401 bad key")


    DBOS(config=dbos_config(URL, name="logging-app"))
    executor = DBOSAgentExecutor(llm=MockLLMAdapter(refuse), database_url=URL)
    executor.register(define_agent(name="refused", system_prompt="Try."))
    '''
)


def test_a_worker_logs_its_lifecycle_and_failed_runs_to_stderr(tmp_path: Path, make_database: Callable[[], str]) -> None:
    url = make_database()
    migrate(url)
    (tmp_path / "logging_app.py").write_text(APP)
    env = {**os.environ, "HELIX_DATABASE_URL": url}
    env.pop("HELIX_LOG_LEVEL", None)
    worker = subprocess.Popen(
        [str(CLI), "worker", "--app", "logging_app:executor", "--executor-id", "log-w1"],
        cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert worker.stdout is not None
        first = worker.stdout.readline()
        assert first.startswith("worker log-w1 listening"), (first, worker.stderr.read() if worker.poll() is not None else "")
        with RunEnqueuer(url) as enqueuer:
            run = enqueuer.enqueue("refused", "Hello?", session_id="refused-1")
            result = enqueuer.result(run, timeout=120)
        assert result.status == "failed"
        worker.send_signal(signal.SIGTERM)
        stdout, stderr = worker.communicate(timeout=120)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.communicate()
    assert worker.returncode == 0, stderr
    assert stdout.splitlines()[-1] == "worker log-w1 stopped"  # stdout keeps its lines

    lines = stderr.splitlines()
    assert any(re.fullmatch(rf"{STAMP} INFO helix_dbos: worker\.lease_acquired executor_id=log-w1 .*", line)
               for line in lines), stderr
    failed = [line for line in lines if " ERROR helix_dbos: run.failed " in line]
    assert len(failed) == 1, stderr
    assert re.fullmatch(rf"{STAMP} ERROR helix_dbos: run\.failed session_id=refused-1 run=1 error=.*the model refused.*",
                        failed[0]), failed
    assert any(re.fullmatch(rf"{STAMP} INFO helix_dbos: worker\.lease_released executor_id=log-w1.*", line)
               for line in lines), stderr
    assert "Traceback" not in stderr


def test_a_log_level_that_is_not_one_is_a_usage_error(tmp_path: Path) -> None:
    env = {**os.environ, "HELIX_LOG_LEVEL": "loud"}
    done = subprocess.run([str(CLI), "worker", "--app", "nowhere:executor"], cwd=tmp_path, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)

    assert done.returncode == 2
    assert done.stderr == "error: HELIX_LOG_LEVEL='LOUD' is not a log level (DEBUG, INFO, WARNING, ERROR)\n"
