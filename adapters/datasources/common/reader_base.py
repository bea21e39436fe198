"""What the engine readers share: their settings, the preparation step and the connect-use-close
flow.

Every reader takes the same keyword settings (``ReaderSettings``) with the same defaults; an
engine adds its own (an encoder, an ODBC driver) in its ``__init__`` after ``super().__init__``.
``EngineReader.prepare`` builds one step per read through the engine's ``statement`` (SQL with
bound values, or a MongoDB query), so a filter value that does not convert fails there, before any
I/O; the engine's ``stream`` runs the steps. ``on_connection`` is the connection test and the
discovery of the PostgreSQL, MySQL, SQL Server and Oracle readers: each passes its own connect,
work, close and failure. ``encoded_chunks`` is the read loop of the SQL Server and Oracle readers
(both encode through ``RowEncoder``).
"""

from __future__ import annotations

import asyncio
from abc import abstractmethod
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from typing import Any, Generic, TypedDict, TypeVar

from adapters.datasources.common.encoding import RowEncoder, paused_gc
from application.errors import DatasourceError, DatasourceQueryFailed
from application.ports.datasource_reader import DatasourceReader, PreparedReads, RowChunk
from domain.connection import Endpoint
from domain.errors import FetcherError
from domain.schema import TableRead

C = TypeVar("C")
T = TypeVar("T")
S = TypeVar("S")


class ReaderSettings(TypedDict, total=False):
    connect_timeout: float
    discover_timeout: float
    query_timeout: float
    chunk_rows: int
    pool_size: int
    pool_idle_seconds: float


class EngineReader(DatasourceReader, Generic[S]):
    """A reader with the common settings: ``connect_timeout`` (seconds to dial),
    ``discover_timeout`` (seconds for a whole discovery), ``query_timeout`` (seconds a statement
    or fetch may take), ``chunk_rows`` (rows per fetched chunk), and for the engines that keep
    connections between jobs (``common.pools``) ``pool_size`` (connections per stored
    connection version; 0: none kept) and ``pool_idle_seconds`` (how long an unused one stays
    open). ``aclose`` closes what the reader keeps open."""

    def __init__(
        self,
        *,
        connect_timeout: float = 10.0,
        discover_timeout: float = 30.0,
        query_timeout: float = 120.0,
        chunk_rows: int = 10_000,
        pool_size: int = 4,
        pool_idle_seconds: float = 60.0,
    ) -> None:
        self._connect_timeout = connect_timeout
        self._discover_timeout = discover_timeout
        self._query_timeout = query_timeout
        self._chunk_rows = chunk_rows
        self._pool_size = pool_size
        self._pool_idle_seconds = pool_idle_seconds

    async def aclose(self) -> None:
        """Closes the connections the reader keeps (none here)."""

    def prepare(self, endpoint: Endpoint, reads: Sequence[TableRead]) -> PreparedReads[S]:
        built = (self.statement(endpoint, read) for read in reads)
        return PreparedReads(tuple(step for step in built if step is not None))

    @abstractmethod
    def statement(self, endpoint: Endpoint, read: TableRead) -> S | None:
        """What reads one table, or ``None`` when no column is asked for; a filter that does not
        fit raises ``InvalidRequest``. No I/O."""


def discovery_failed(error: BaseException) -> FetcherError:
    """The error of a discovery that failed because of ``error``."""
    return DatasourceError("failed to discover datasource schema", stage="discover")


async def on_connection(
    connect: Callable[[], Awaitable[C]],
    work: Callable[[C], Awaitable[T]],
    close: Callable[[C], Awaitable[None]],
    *,
    timeout: float,
    failure: Callable[[BaseException], FetcherError],
) -> T:
    """Connects, runs ``work`` on the connection and closes it, all within ``timeout`` seconds.
    A ``FetcherError`` (one the engine already named) passes; any other error, the timeout
    included, becomes ``failure(error)``."""
    try:
        async with asyncio.timeout(timeout):
            connection = await connect()
            try:
                return await work(connection)
            finally:
                await close(connection)
    except FetcherError:
        raise
    except Exception as error:
        raise failure(error) from error


async def encoded_chunks(
    execute: Callable[[], Awaitable[object]],
    fetchmany: Callable[[int], Awaitable[Sequence[Sequence[Any]]]],
    encoder: RowEncoder,
    result_key: str,
    size: int,
) -> AsyncGenerator[RowChunk, None]:
    """Runs ``execute``, then reads ``fetchmany(size)`` until a chunk comes back short, each chunk
    encoded by ``encoder`` with the GC paused (the fetch itself runs with the GC on). A
    ``FetcherError`` passes; any other error becomes ``DatasourceQueryFailed``. The cursor is
    the caller's to open and close."""
    try:
        await execute()
        while True:
            rows = await fetchmany(size)
            with paused_gc():
                data = encoder.encode(rows)
            count = len(rows)
            del rows
            if count:
                yield RowChunk(result_key=result_key, data=data, rows=count)
            if count < size:
                return
    except FetcherError:
        raise
    except Exception as error:
        raise DatasourceQueryFailed() from error
