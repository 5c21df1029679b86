"""helix's log: named events with fields, silent until you ask for them.

helix logs to the standard ``helix_dbos`` logger, which has only a ``NullHandler``:
nothing reaches stderr until your app configures logging. Give the executor a logger of
your own and the run's events go there instead::

    DBOSAgentExecutor(llm, url, logger=logging.getLogger("myapp.agents"))   # a standard Logger
    DBOSAgentExecutor(llm, url, logger=structlog.get_logger())             # or a structlog-style one

Every event has a stable name and fields (``session_id``, ``tool_call_id``, ...):

- a standard ``logging.Logger`` (or ``LoggerAdapter``) gets one record per event: its
  message is ``"<event> key=value ..."``, and the record carries ``event`` (the name),
  ``fields`` (a dict) and each field as an attribute, for formatters and handlers;
- any other object with ``debug``/``info``/``warning``/``error`` methods that take the
  event name and the fields as keyword arguments (:class:`StructuredLogger`: structlog's
  loggers, or a three-line adapter over a pino-style logger) gets
  ``logger.info("client_tool.suspended", session_id=..., ...)``.

The events: ``client_tool.suspended`` / ``.submitted`` / ``.timeout`` /
``.validation_failed`` (client tools and approvals alike, ``kind`` says which),
``subagent.dispatch_failed``, ``hook.failed``, ``tool.failed`` (a tool raised: with
its traceback) and ``run.failed``. A logger that raises never breaks a run.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Literal, Protocol, Union, runtime_checkable

from helix_dbos.errors import ConfigurationError

LOGGER_NAME = "helix_dbos"
"""The library's logger; ``import helix_dbos`` gives it a NullHandler."""

Level = Literal["debug", "info", "warning", "error"]

_RESERVED = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}
"""Attribute names a LogRecord already has: a field of that name stays only in ``fields``."""


@runtime_checkable
class StructuredLogger(Protocol):
    """A logger that takes an event name and keyword fields (structlog's shape)."""

    def debug(self, event: str, **fields: Any) -> Any:
        """Log ``event`` at debug level.

        Args:
            event: The event's stable dotted name, for example ``run.failed``.
            **fields: The event's fields.
        """

    def info(self, event: str, **fields: Any) -> Any:
        """Log ``event`` at info level.

        Args:
            event: The event's stable dotted name, for example ``run.failed``.
            **fields: The event's fields.
        """

    def warning(self, event: str, **fields: Any) -> Any:
        """Log ``event`` at warning level.

        Args:
            event: The event's stable dotted name, for example ``run.failed``.
            **fields: The event's fields.
        """

    def error(self, event: str, **fields: Any) -> Any:
        """Log ``event`` at error level.

        Args:
            event: The event's stable dotted name, for example ``run.failed``.
            **fields: The event's fields.
        """


AnyLogger = Union[logging.Logger, logging.LoggerAdapter, StructuredLogger]  # type: ignore[type-arg]
"""What ``DBOSAgentExecutor(logger=...)`` accepts."""


class EventLog:
    """Writes helix's events to one logger (default: the ``helix_dbos`` logger)::

        log = EventLog(logging.getLogger("myapp"))
        log.info("client_tool.submitted", session_id="s1", tool_call_id="t1")
    """

    def __init__(self, logger: AnyLogger | None = None) -> None:
        """Raises :class:`ConfigurationError` for anything that is not a logger."""
        if logger is not None and not is_logger(logger):
            raise ConfigurationError(
                f"logger must be a logging.Logger, a logging.LoggerAdapter or have debug/info/warning/error"
                f" methods taking (event, **fields); got {type(logger).__name__}"
            )
        self.logger: AnyLogger = logger if logger is not None else logging.getLogger(LOGGER_NAME)

    def debug(self, event: str, **fields: Any) -> None:
        self.emit("debug", event, fields)

    def info(self, event: str, **fields: Any) -> None:
        self.emit("info", event, fields)

    def warning(self, event: str, **fields: Any) -> None:
        self.emit("warning", event, fields)

    def error(self, event: str, *, exc_info: bool = False, **fields: Any) -> None:
        """An error event; ``exc_info=True`` adds the exception being handled."""
        self.emit("error", event, fields, exc_info=exc_info)

    def emit(self, level: Level, event: str, fields: dict[str, Any], exc_info: bool = False) -> None:
        try:
            if isinstance(self.logger, (logging.Logger, logging.LoggerAdapter)):
                _log_record(self.logger, _LEVELS[level], event, fields, exc_info)
            else:
                getattr(self.logger, level)(event, **fields, **({"exc_info": True} if exc_info else {}))
        except Exception:  # a broken logger must not break a run
            logging.getLogger(LOGGER_NAME).warning("the logger failed on event %s", event, exc_info=True)


def is_logger(value: Any) -> bool:
    """Whether ``value`` is a standard logger or a :class:`StructuredLogger`."""
    return isinstance(value, (logging.Logger, logging.LoggerAdapter)) or (
        not isinstance(value, type) and isinstance(value, StructuredLogger)
    )


def _log_record(logger: Any, level: int, event: str, fields: dict[str, Any], exc_info: bool) -> None:
    """One record; an adapter adds its context first (its ``extra`` would replace ours)."""
    extra = {"event": event, "fields": fields, **{k: v for k, v in fields.items() if k not in _RESERVED}}
    message = _line(event, fields)
    while isinstance(logger, logging.LoggerAdapter):
        message, kwargs = logger.process(message, {})
        extra = {**(kwargs.get("extra") or {}), **extra}
        logger = logger.logger
    logger.log(level, "%s", message, extra=extra, exc_info=exc_info)


_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


def _line(event: str, fields: dict[str, Any]) -> str:
    """``event key=value ...``: strings without spaces as they are, other values as JSON."""
    parts = [event]
    for key, value in fields.items():
        plain = isinstance(value, str) and value and not any(c.isspace() or c in "\"=" for c in value)
        parts.append(f"{key}={value if plain else json.dumps(value, default=str, ensure_ascii=False)}")
    return " ".join(parts)
