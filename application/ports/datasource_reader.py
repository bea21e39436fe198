from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from domain.connection import Endpoint
from domain.schema import Schema, TableRead


@dataclass(frozen=True, slots=True)
class RowChunk:
    """Rows of one table, already encoded in the common result format.

    ``data`` is the JSON of ``rows`` objects joined by commas, without brackets
    (``{"a":1},{"a":2}``); it is never empty.
    """

    result_key: str
    data: bytes
    rows: int


class DatasourceReader(Protocol):
    """Reads one kind of database (or dispatches by ``endpoint.type`` to the engine that does).

    - ``test`` opens and pings a connection within ``timeout`` seconds, then closes it.
    - ``discover`` lists tables (system objects removed) in the given schemas (``scope``; empty
      means the engine default), keyed by the engine's normalised table name.
    - ``extract`` reads each ``TableRead`` in order, yielding chunks as rows arrive; memory
      stays bounded whatever the table size. Tables without rows yield nothing. ``extract`` is a
      plain method returning the async iterator: when called it builds every statement (or
      MongoDB query), converting each filter value by its column's type, and raises
      ``domain.errors.InvalidRequest`` (FET-0401) right there, before any I/O; connecting and
      reading start when the iterator is first iterated. The planner relies on this to refuse
      such a job before reading a row.
    - Failures raise ``application.errors.DatasourceError`` subclasses whose text carries no
      credentials; driver messages are kept only in the exception chain.
    """

    async def test(self, endpoint: Endpoint, timeout: float) -> None: ...

    async def discover(self, endpoint: Endpoint, scope: Sequence[str]) -> Schema: ...

    def extract(
        self, endpoint: Endpoint, reads: Sequence[TableRead]
    ) -> AsyncIterator[RowChunk]: ...
