"""The fields every log line of the current unit of work carries (``job_id``, ``request_id``,
``tenant``...), kept in a context variable so that a line logged anywhere below, in any layer,
says which job and request it belongs to. The log formatter (``entrypoints.logs``) adds them.

Tasks and threads started inside inherit the fields (asyncio copies the context).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from types import MappingProxyType

_EMPTY: Mapping[str, object] = MappingProxyType({})
_FIELDS: ContextVar[Mapping[str, object]] = ContextVar("fetcher_log_fields", default=_EMPTY)


def _merged(fields: Mapping[str, object]) -> Mapping[str, object]:
    current = dict(_FIELDS.get())
    current.update((k, v) for k, v in fields.items() if v is not None and v != "")
    return MappingProxyType(current)


@contextlib.contextmanager
def log_fields(**fields: object) -> Iterator[None]:
    """Adds ``fields`` (empty values skipped) to every line logged inside the block."""
    token = _FIELDS.set(_merged(fields))
    try:
        yield
    finally:
        _FIELDS.reset(token)


def bind_log_fields(**fields: object) -> None:
    """Adds ``fields`` for the rest of the current context (e.g. a request, whose scope
    restores the fields it started with)."""
    _FIELDS.set(_merged(fields))


def current_log_fields() -> Mapping[str, object]:
    return _FIELDS.get()
