"""What the engine readers share: their settings, the preparation step, and the flow of the SQL
engines' readers around their connections.

Every reader takes the same keyword settings (``ReaderSettings``) with the same defaults; an
engine adds its own (an encoder, an ODBC driver) in its ``__init__`` after ``super().__init__``.
``EngineReader.prepare`` builds one step per read through the engine's ``statement`` (SQL with
bound values, or a MongoDB query), so a filter value that does not convert fails there, before any
I/O; the engine's ``stream`` runs the steps.

The SQL engines' readers are ``SqlReader``s: ``test`` pings a fresh connection (``_connect``,
``_ping``, ``_close``) and ``stream`` reads the steps one after another on one session
(``_session``: the connection in the engine's snapshot or settings), each through the engine's
``_stream``; discovery runs its work through ``_discovered``. A ``ConnectingReader`` (SQL Server,
Oracle) connects for each of them and closes after; a ``PooledReader`` (PostgreSQL, MySQL) leases
discovery's and extraction's connections from its pools (``common.pools``). ``on_connection`` is
the connect-use-close flow with its deadline; ``encoded_chunks`` is the read loop of the SQL
Server and Oracle readers (both encode through ``RowEncoder``).
"""

from __future__ import annotations

import asyncio
from abc import abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, aclosing, asynccontextmanager
from typing import Any, Generic, Protocol, TypedDict, TypeVar, Unpack

from adapters.datasources.common.encoding import RowEncoder, paused_gc
from adapters.datasources.common.failures import unavailable
from adapters.datasources.common.pools import ConnectionPools, Pool
from application.errors import DatasourceError, DatasourceQueryFailed
from application.ports.datasource_reader import DatasourceReader, PreparedReads, RowChunk
from domain.connection import Endpoint
from domain.errors import FetcherError
from domain.schema import TableRead

C = TypeVar("C")
T = TypeVar("T")
S = TypeVar("S")
P = TypeVar("P", bound=Pool[Any])


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


class SqlReader(EngineReader[S], Generic[S, C]):
    """A SQL engine's reader over connections of type ``C``. ``_unavailable`` is the engine's
    error for a connection that could not be opened (a ``DatasourceUnavailable``)."""

    @staticmethod
    def _unavailable(error: BaseException) -> FetcherError:
        return unavailable(error)

    @abstractmethod
    async def _connect(self, endpoint: Endpoint, timeout: float) -> C:
        """A new connection, opened within about ``timeout`` seconds; ``_unavailable`` when it
        cannot be."""

    @abstractmethod
    async def _close(self, connection: C) -> None:
        """Closes ``connection``; never raises."""

    @abstractmethod
    async def _ping(self, connection: C) -> None:
        """One round trip to the server."""

    @abstractmethod
    def _session(self, endpoint: Endpoint) -> AbstractAsyncContextManager[C]:
        """The connection one extraction reads all its steps on, in the engine's session
        (snapshot, settings); errors raised here are ``FetcherError``s."""

    @abstractmethod
    def _stream(self, connection: C, statement: S) -> AsyncGenerator[RowChunk, None]:
        """The chunks of one step."""

    @abstractmethod
    async def _discovered(self, endpoint: Endpoint, work: Callable[[C], Awaitable[T]]) -> T:
        """``work`` on a connection, within ``discover_timeout``; a failure that is not a
        ``FetcherError`` becomes ``discovery_failed``'s."""

    async def test(self, endpoint: Endpoint, timeout: float) -> None:
        await on_connection(
            lambda: self._connect(endpoint, timeout),
            self._ping,
            self._close,
            timeout=timeout,
            failure=self._unavailable,
        )

    async def stream(
        self, endpoint: Endpoint, prepared: PreparedReads[S]
    ) -> AsyncGenerator[RowChunk, None]:
        statements = prepared.steps
        if not statements:
            return
        async with self._session(endpoint) as connection:
            for statement in statements:
                async with aclosing(self._stream(connection, statement)) as chunks:
                    async for chunk in chunks:
                        yield chunk


class _Closable(Protocol):
    async def close(self) -> None: ...


K = TypeVar("K", bound=_Closable)


class ConnectingReader(SqlReader[S, K]):
    """A reader that holds no connection between calls: each test, discovery and extraction
    connects (within ``connect_timeout``) and closes after. ``_begin`` prepares an extraction's
    session (nothing by default)."""

    async def _close(self, connection: K) -> None:
        try:
            await connection.close()
        except Exception:
            pass

    async def _begin(self, connection: K) -> None:
        """Prepares the session of an extraction; raises ``DatasourceQueryFailed``."""

    @asynccontextmanager
    async def _session(self, endpoint: Endpoint) -> AsyncIterator[K]:
        connection = await self._connect(endpoint, self._connect_timeout)
        try:
            await self._begin(connection)
            yield connection
        finally:
            await self._close(connection)

    async def _discovered(self, endpoint: Endpoint, work: Callable[[K], Awaitable[T]]) -> T:
        return await on_connection(
            lambda: self._connect(endpoint, self._connect_timeout),
            work,
            self._close,
            timeout=self._discover_timeout,
            failure=discovery_failed,
        )


class PooledReader(SqlReader[S, C], Generic[S, P, C]):
    """A reader that keeps connections between jobs in bounded pools of type ``P`` (one per
    stored connection version, ``common.pools``): discovery and extraction lease one
    (``_open`` serves endpoints that are not pooled), ``test`` always opens a fresh one, so
    it proves the credentials as they are now. ``aclose`` closes the pools."""

    def __init__(self, **settings: Unpack[ReaderSettings]) -> None:
        super().__init__(**settings)
        self._pools: ConnectionPools[P, C] = ConnectionPools(
            open_pool=self._open_pool,
            close_pool=self._close_pool,
            connect=self._open,
            close=self._close,
            failure=self._unavailable,
            size=self._pool_size,
            idle_seconds=self._pool_idle_seconds,
        )

    @property
    def pools(self) -> ConnectionPools[P, C]:
        return self._pools

    async def aclose(self) -> None:
        await self._pools.aclose()

    @abstractmethod
    async def _open_pool(self, endpoint: Endpoint, size: int, idle_seconds: float) -> P:
        """A pool of up to ``size`` connections for ``endpoint``, none opened yet."""

    @abstractmethod
    async def _close_pool(self, pool: P) -> None:
        """Closes ``pool``, waiting a while for its leased connections."""

    async def _open(self, endpoint: Endpoint) -> C:
        """A connection for discovery or extraction when ``endpoint`` is not pooled."""
        return await self._connect(endpoint, self._connect_timeout)

    async def _on_lease(self, endpoint: Endpoint, work: Callable[[C], Awaitable[T]]) -> T:
        """``work`` on a connection leased for ``endpoint`` (discovery's)."""
        async with self._pools.connection(endpoint) as connection:
            return await work(connection)

    async def _discovered(self, endpoint: Endpoint, work: Callable[[C], Awaitable[T]]) -> T:
        try:
            async with asyncio.timeout(self._discover_timeout):
                return await self._on_lease(endpoint, work)
        except FetcherError:
            raise
        except Exception as error:
            raise discovery_failed(error) from error


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
