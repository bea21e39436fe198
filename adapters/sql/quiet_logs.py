"""Keeps the values of SQL statements and rows out of the logs of SQLAlchemy and aiosqlite.

Rows of the connections table hold sealed credentials. Engines are built with
``hide_parameters=True`` (SQLAlchemy's statement log and its error messages then omit bound
values); two DEBUG logs remain, which this filter empties of values: SQLAlchemy's ``Row %r``
lines, and aiosqlite's ``executing %s``/``operation %s completed`` lines, whose argument is the
driver call with its statement and parameters. asyncpg logs no statements.
"""

from __future__ import annotations

import functools
import logging

ENGINE_LOGGER = "sqlalchemy.engine.Engine"
AIOSQLITE_LOGGER = "aiosqlite"


def _call_name(value: object) -> object:
    """A driver call (``functools.partial``) as the name of what it calls."""
    if isinstance(value, functools.partial):
        func = value.func
        return f"{getattr(func, '__qualname__', type(func).__name__)}(...)"
    return value


class HideStatementValues(logging.Filter):
    """Rewrites a record's arguments in place (so every handler sees the redacted record)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == ENGINE_LOGGER and record.msg == "Row %r":
            record.msg, record.args = "Row (values hidden)", ()
        elif record.name == AIOSQLITE_LOGGER and isinstance(record.args, tuple):
            record.args = tuple(_call_name(arg) for arg in record.args)
        return True


def hide_statement_values() -> None:
    """Installs the filter on both loggers, once."""
    for name in (ENGINE_LOGGER, AIOSQLITE_LOGGER):
        logger = logging.getLogger(name)
        if not any(isinstance(f, HideStatementValues) for f in logger.filters):
            logger.addFilter(HideStatementValues())
