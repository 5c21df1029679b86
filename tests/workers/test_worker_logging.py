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
    """A worker app: the model refuses every call of ``refused`` (its runs fail), and
    ``support``'s tool raises KeyError('user_id')."""
    import os

    from dbos import DBOS
    from helix_dbos import DBOSAgentExecutor, MockLLMAdapter, dbos_config, define_agent, tool
    from helix_dbos.llm import PermanentLLMError
    from helix_dbos.types import TextStepResult, ToolCallsStepResult

    URL = os.environ["HELIX_DATABASE_URL"]


    @tool
    def lookup_user(name: str) -> dict:
        """Looks a user up."""
        users = {"ada": {"name": "ada"}}
        return {"id": users[name]["user_id"]}


    def respond(messages, tools):
        if not any(t.name == "lookup_user" for t in tools):
            raise PermanentLLMError("the model refused: 401 bad key")
        if messages[-1].role == "tool":
            return TextStepResult(content="no such user")
        return ToolCallsStepResult(tool_calls=[{"id": "call-1", "name": "lookup_user", "arguments": {"name": "ada"}}])


    DBOS(config=dbos_config(URL, name="logging-app"))
    executor = DBOSAgentExecutor(llm=MockLLMAdapter(respond), database_url=URL)
    executor.register(define_agent(name="refused", system_prompt="Try."),
                      define_agent(name="support", system_prompt="Help.", tools=[lookup_user]))
    '''
)


def work(tmp_path: Path, url: str, agent: str, session_id: str) -> tuple[str, str, str]:
    """Run one run of ``agent`` on a ``helix-dbos worker`` (executor ``log-w1``), then
    SIGTERM it: the run's status, the worker's stdout and its stderr."""
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
            run = enqueuer.enqueue(agent, "Hello?", session_id=session_id)
            status = enqueuer.result(run, timeout=120).status
        worker.send_signal(signal.SIGTERM)
        stdout, stderr = worker.communicate(timeout=120)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.communicate()
    assert worker.returncode == 0, stderr
    assert stdout.splitlines()[-1] == "worker log-w1 stopped"  # stdout keeps its lines
    return status, stdout, stderr


def test_a_worker_logs_its_lifecycle_and_failed_runs_to_stderr(tmp_path: Path, make_database: Callable[[], str]) -> None:
    url = make_database()
    migrate(url)
    status, _, stderr = work(tmp_path, url, "refused", "refused-1")
    assert status == "failed"

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


def test_a_worker_logs_a_tool_that_raises_with_its_traceback(tmp_path: Path, make_database: Callable[[], str]) -> None:
    url = make_database()
    migrate(url)
    status, _, stderr = work(tmp_path, url, "support", "support-1")
    assert status == "completed"  # the model saw the error and answered

    lines = stderr.splitlines()
    failed = [i for i, line in enumerate(lines) if " ERROR helix_dbos: tool.failed " in line]
    assert len(failed) == 1, stderr
    assert re.fullmatch(
        rf"{STAMP} ERROR helix_dbos: tool\.failed session_id=support-1 run=1 step=1 tool_call_id=call-1"
        r" tool=lookup_user error_type=KeyError error=\"KeyError: 'user_id'\"",
        lines[failed[0]],
    ), lines[failed[0]]
    traceback = lines[failed[0] + 1:]
    assert traceback[0] == "Traceback (most recent call last):", stderr
    assert 'return {"id": users[name]["user_id"]}' in stderr
    assert "KeyError: 'user_id'" in traceback


def test_a_log_level_that_is_not_one_is_a_usage_error(tmp_path: Path) -> None:
    env = {**os.environ, "HELIX_LOG_LEVEL": "loud"}
    done = subprocess.run([str(CLI), "worker", "--app", "nowhere:executor"], cwd=tmp_path, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)

    assert done.returncode == 2
    assert done.stderr == "error: HELIX_LOG_LEVEL='LOUD' is not a log level (DEBUG, INFO, WARNING, ERROR)\n"
