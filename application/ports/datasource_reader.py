from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from domain.connection import Endpoint
from domain.schema import Schema, TableRead

Step = TypeVar("Step", covariant=True)


@dataclass(frozen=True, slots=True)
class RowChunk:
    """Rows of one table, already encoded in the common result format.

    ``data`` is the JSON of ``rows`` objects joined by commas, without brackets
    (``{"a":1},{"a":2}``); it is never empty.
    """

    result_key: str
    data: bytes
    rows: int


@dataclass(frozen=True, slots=True)
class PreparedReads(Generic[Step]):
    """The reads of one datasource as ``DatasourceReader.prepare`` checked and built them.

    ``steps`` are the engine's own (SQL statements with their bound values, MongoDB queries), one
    per table that has columns to read, in the order of the reads. They hold no credentials and
    no connection; only the reader that built them interprets them. No steps: nothing to read.
    """

    steps: tuple[Step, ...]


class DatasourceReader(Protocol):
    """Reads one kind of database (or dispatches by ``endpoint.type`` to the engine that does).

    Required: every engine adapter, the engine registry, the SSRF guard's wrapper and the
    in-memory twin implement all four methods.

    - ``test`` opens and pings a connection within ``timeout`` seconds, then closes it.
    - ``discover`` lists tables (system objects removed) in the given schemas (``scope``; empty
      means the engine default), keyed by the engine's normalised table name.
    - ``prepare`` is the first step of an extraction and does no I/O: it checks every filter
      of the reads, converting each value by its column's type, and builds the statements (or
      MongoDB queries) that read them. A value that does not convert, an unknown operator or a
      wrong number of values raises ``domain.errors.InvalidRequest`` (FET-0401) when
      ``prepare`` is called. Reads without columns build nothing. The planner prepares each
      datasource's reads once, before any row is read, and keeps the result.
    - ``stream`` is the second step: it returns an async generator over the chunks of
      ``prepared``, table by table in order, as rows arrive; memory stays bounded whatever the
      table size. Nothing happens until the iterator is first iterated: then it connects to
      ``endpoint`` (the one the reads were prepared for) and reads. Tables without rows yield
      nothing; with no steps it yields nothing and does not connect. All tables are read in
      one session (a consistent snapshot where the engine offers one); stopping early (the
      generator's ``aclose``) closes the connection.
    - Failures raise ``application.errors.DatasourceError`` subclasses whose text carries no
      credentials; driver messages are kept only in the exception chain. A failure to connect
      carries ``reason`` (a ``ConnectFailure``) when the adapter recognised its cause.
    - Wrappers (the registry, the host guard) pass every step through and never defer or skip
      ``prepare``; a wrapper that dials checks the host before ``test``, ``discover`` and the
      connect of ``stream``.
    - Endpoints carry passwords and TLS keys: never log them or put them in errors.
    """

    async def test(self, endpoint: Endpoint, timeout: float) -> None: ...

    async def discover(self, endpoint: Endpoint, scope: Sequence[str]) -> Schema: ...

    def prepare(self, endpoint: Endpoint, reads: Sequence[TableRead]) -> PreparedReads[Any]: ...

    def stream(
        self, endpoint: Endpoint, prepared: PreparedReads[Any]
    ) -> AsyncGenerator[RowChunk, None]: ...
