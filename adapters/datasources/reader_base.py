"""What the engine readers share: their settings.

Every reader takes the same keyword settings (``ReaderSettings``) with the same defaults; an
engine adds its own (an encoder, an ODBC driver) in its ``__init__`` after ``super().__init__``.
"""

from __future__ import annotations

from typing import TypedDict

from application.ports.datasource_reader import DatasourceReader


class ReaderSettings(TypedDict, total=False):
    connect_timeout: float
    discover_timeout: float
    query_timeout: float
    chunk_rows: int


class EngineReader(DatasourceReader):
    """A reader with the common settings: ``connect_timeout`` (seconds to dial),
    ``discover_timeout`` (seconds for a whole discovery), ``query_timeout`` (seconds a statement
    or fetch may take) and ``chunk_rows`` (rows per fetched chunk)."""

    def __init__(
        self,
        *,
        connect_timeout: float = 10.0,
        discover_timeout: float = 30.0,
        query_timeout: float = 120.0,
        chunk_rows: int = 10_000,
    ) -> None:
        self._connect_timeout = connect_timeout
        self._discover_timeout = discover_timeout
        self._query_timeout = query_timeout
        self._chunk_rows = chunk_rows
