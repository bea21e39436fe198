"""Log lines as records: an event name and fields, the same in text and in JSON.

Code logs an event name as the message and its facts as ``extra`` fields::

    log.info("job.completed", extra={"rows": 10, "bytes": 1234, "duration_ms": 56})

Every line also gets the fields of the unit of work it belongs to (``job_id``,
``request_id``, ``tenant``: ``application.log_context``) and, inside a span, ``trace_id`` and
``span_id``. ``LOG_FORMAT=text`` prints them as ``key=value`` after the event; ``json`` as one
object per line (python-json-logger): ``{"time", "level", "logger", "event", ...fields}``.
Lines of other libraries (uvicorn, aio-pika...) go through the same handler.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import IO, Any

from opentelemetry import trace
from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.json import JsonFormatter

from application.log_context import current_log_fields
from entrypoints.observability_settings import LogSettings

ACCESS_LOGGER = "fetcher.access"
FIRST_FIELDS = ("job_id", "request_id", "tenant")
_NOT_FIELDS = frozenset(RESERVED_ATTRS) | {"message", "asctime", "color_message", "taskName"}


def record_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The fields of ``record`` (everything but the standard attributes), context ones first."""
    extra = {k: v for k, v in record.__dict__.items() if k not in _NOT_FIELDS}
    first = {k: extra.pop(k) for k in FIRST_FIELDS if k in extra}
    return {**first, **extra}


class ContextFilter(logging.Filter):
    """Adds the unit of work's fields and the current trace to each record (a field the line
    sets itself is kept)."""

    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in current_log_fields().items():
            record.__dict__.setdefault(key, value)
        context = trace.get_current_span().get_span_context()
        if context.is_valid:
            record.__dict__.setdefault("trace_id", format(context.trace_id, "032x"))
            record.__dict__.setdefault("span_id", format(context.span_id, "016x"))
        return True


CONNECTION_LIBRARIES = (
    "aiormq",
    "aio_pika",
    "asyncpg",
    "sqlalchemy.pool",
    "botocore",
    "aiobotocore",
)
"""Loggers (and their children) of clients whose own lines about a lost connection repeat at
every reconnection attempt, often with a traceback at ERROR (aiormq's reader, aio-pika's
robust connection, SQLAlchemy's pool resetting a dead connection)."""


def _connection_library(name: str) -> bool:
    return any(name == each or name.startswith(f"{each}.") for each in CONNECTION_LIBRARIES)


class QuietConnectionLibraries(logging.Filter):
    """Keeps the connection libraries' lines out of the log unless ``LOG_LEVEL`` is
    ``debug``: the service logs each change of a dependency's state once itself (``message
    broker connection lost`` / ``restored``, ``waiting for ...`` / ``... is reachable``, a
    follower's ``failing`` / ``recovered``), and wraps what a library raises in its own
    errors."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not _connection_library(record.name):
            return True
        return logging.getLogger().isEnabledFor(logging.DEBUG)


def _utc_time(record: logging.LogRecord) -> str:
    seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
    return f"{seconds}.{int(record.msecs):03d}Z"


def _text_value(value: Any) -> str:
    text = value if isinstance(value, str) else str(value)
    if isinstance(value, bool | int | float) and not isinstance(value, str):
        return text
    if not text or any(c in text for c in ' "=\\') or not text.isprintable():
        return json.dumps(text, ensure_ascii=False)
    return text


class TextFormatter(logging.Formatter):
    """``<time> <LEVEL> <logger>: <event> key=value ...`` (values with spaces or quotes are
    JSON-quoted), then the traceback if any."""

    def format(self, record: logging.LogRecord) -> str:
        record.message = record.getMessage()
        parts = [_utc_time(record), record.levelname, f"{record.name}:", record.message]
        parts += [f"{k}={_text_value(v)}" for k, v in record_fields(record).items()]
        line = " ".join(parts)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line = f"{line}\n{record.exc_text}"
        if record.stack_info:
            line = f"{line}\n{self.formatStack(record.stack_info)}"
        return line


class JsonLineFormatter(JsonFormatter):
    """One JSON object per line: ``time``, ``level``, ``logger``, ``event``, then the fields."""

    def __init__(self) -> None:
        super().__init__(
            ["asctime", "levelname", "name", "message"],
            rename_fields={
                "asctime": "time",
                "levelname": "level",
                "name": "logger",
                "message": "event",
            },
            json_ensure_ascii=False,
        )

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return _utc_time(record)

    def add_fields(
        self,
        log_data: dict[str, Any],
        record: logging.LogRecord,
        message_dict: dict[str, Any],
    ) -> None:
        super().add_fields(log_data, record, message_dict)
        ordered = record_fields(record)
        for key in ordered:
            log_data.pop(key, None)
        log_data.update(ordered)


def _handler_mark(handler: logging.Handler) -> bool:
    return getattr(handler, "_fetcher_logs", False) is True


def configure_logging(settings: LogSettings, stream: IO[str] | None = None) -> logging.Handler:
    """One handler on the root logger, to standard error (or ``stream``), at the set level.
    Called again, it replaces the handler it installed before (and no other)."""
    handler = logging.StreamHandler(sys.stderr if stream is None else stream)
    handler._fetcher_logs = True  # type: ignore[attr-defined]
    formatter: logging.Formatter = (
        JsonLineFormatter() if settings.format == "json" else TextFormatter()
    )
    handler.setFormatter(formatter)
    handler.addFilter(QuietConnectionLibraries())
    handler.addFilter(ContextFilter())
    root = logging.getLogger()
    for old in [h for h in root.handlers if _handler_mark(h)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(settings.level)
    return handler
