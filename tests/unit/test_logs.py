"""helix's event log (``helix_dbos._logs``) and the filter that keeps DBOS quiet about
helix runs ending through abort (``_durable/dbos_log.py``): real loggers, real records."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from dbos import error as dbos_errors

from helix_dbos._durable.dbos_log import cancelled_helix_workflow
from helix_dbos.errors import ConfigurationError
from helix_dbos._logs import EventLog, StructuredLogger


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def logger_with(handler: logging.Handler, name: str) -> logging.Logger:
    logger = logging.getLogger(name)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    logger.addHandler(handler)
    return logger


def test_a_standard_logger_gets_the_event_its_fields_and_a_readable_line() -> None:
    handler = Collect()
    log = EventLog(logger_with(handler, "test.logs.std"))
    log.warning("client_tool.timeout", session_id="s 1", tool_call_id="t1", step=2, name="clash", args=None)
    (record,) = handler.records
    assert (record.levelno, record.event) == (logging.WARNING, "client_tool.timeout")  # type: ignore[attr-defined]
    assert record.fields == {"session_id": "s 1", "tool_call_id": "t1", "step": 2, "name": "clash", "args": None}  # type: ignore[attr-defined]
    assert record.getMessage() == 'client_tool.timeout session_id="s 1" tool_call_id=t1 step=2 name=clash args=null'
    assert record.tool_call_id == "t1"  # type: ignore[attr-defined]
    assert record.name == "test.logs.std"  # a field named like a LogRecord attribute stays in ``fields`` only


def test_a_logger_adapter_works_too() -> None:
    handler = Collect()
    adapter = logging.LoggerAdapter(logger_with(handler, "test.logs.adapter"), {"app": "shop"})
    EventLog(adapter).info("client_tool.submitted", session_id="s1")
    assert [r.event for r in handler.records] == ["client_tool.submitted"]  # type: ignore[attr-defined]


def test_a_keyword_logger_gets_the_event_name_and_fields_and_exc_info() -> None:
    calls: list[tuple[str, str, dict[str, Any]]] = []

    class Keywords:
        def debug(self, event: str, **fields: Any) -> None:
            calls.append(("debug", event, fields))

        def info(self, event: str, **fields: Any) -> None:
            calls.append(("info", event, fields))

        def warning(self, event: str, **fields: Any) -> None:
            calls.append(("warning", event, fields))

        def error(self, event: str, **fields: Any) -> None:
            calls.append(("error", event, fields))

    assert isinstance(Keywords(), StructuredLogger)
    log = EventLog(Keywords())
    log.info("client_tool.suspended", session_id="s1", kind="client")
    try:
        raise ValueError("boom")
    except ValueError:
        log.error("hook.failed", hook="after_tool", exc_info=True)
    assert calls == [
        ("info", "client_tool.suspended", {"session_id": "s1", "kind": "client"}),
        ("error", "hook.failed", {"hook": "after_tool", "exc_info": True}),
    ]


def test_a_logger_that_raises_never_breaks_the_caller() -> None:
    class Broken:
        def debug(self, event: str, **fields: Any) -> None:
            raise RuntimeError("logger down")

        info = warning = error = debug

    handler = Collect()
    library = logging.getLogger("helix_dbos")
    library.addHandler(handler)
    try:
        EventLog(Broken()).info("client_tool.submitted", session_id="s1")
    finally:
        library.removeHandler(handler)
    assert [r.getMessage() for r in handler.records] == ["the logger failed on event client_tool.submitted"]


@pytest.mark.parametrize("value", [print, "helix", 42, logging.Logger])
def test_anything_else_is_refused(value: Any) -> None:
    with pytest.raises(ConfigurationError, match="logger must be"):
        EventLog(value)


def test_the_default_is_the_silent_library_logger() -> None:
    assert EventLog().logger is logging.getLogger("helix_dbos")


def _record(level: int, message: str, exc: BaseException | None = None) -> logging.LogRecord:
    exc_info = (type(exc), exc, None) if exc is not None else None
    return logging.LogRecord("dbos", level, "_core.py", 1, message, None, exc_info)


def test_only_dbos_records_about_a_cancelled_helix_run_are_taken() -> None:
    wid = "helix:s 1:run:2"
    awaited = dbos_errors.DBOSAwaitedWorkflowCancelledError(wid)
    assert cancelled_helix_workflow(_record(logging.ERROR, "Exception encountered", awaited)) == wid
    assert cancelled_helix_workflow(
        _record(logging.WARNING, f"Workflow {wid} is no longer owned by this execution. Waiting")
    ) == wid
    assert cancelled_helix_workflow(_record(logging.WARNING, f"Workflow {wid} outcome was not recorded: ...")) == wid
    # your own workflows, other errors and other levels are left alone
    theirs = dbos_errors.DBOSAwaitedWorkflowCancelledError("orders-42")
    assert cancelled_helix_workflow(_record(logging.ERROR, "Exception encountered", theirs)) is None
    assert cancelled_helix_workflow(_record(logging.WARNING, "Workflow orders-42 is no longer owned by this")) is None
    assert cancelled_helix_workflow(_record(logging.ERROR, "Exception encountered", RuntimeError(wid))) is None
    assert cancelled_helix_workflow(_record(logging.ERROR, f"Workflow {wid} is no longer owned by this")) is None
    # outside any workflow there is no run whose task was cancelled
    assert cancelled_helix_workflow(_record(logging.WARNING, "Asyncio task cancelled for workflow or step f")) is None
