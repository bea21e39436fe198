"""MySQL / MariaDB datasource reader on aiomysql: connection test, discovery, streamed extraction.

Connection and TLS: ``connection``. Discovery, statements and filters: ``statements``. Row
encoding (the common result format): ``values``.

Extraction: one ``REPEATABLE READ`` read-only transaction with a consistent snapshot per job, each
statement built with SQLAlchemy Core (quoted identifiers, values bound by the driver's escaping)
and read through an unbuffered server-side cursor (``SSCursor``) in chunks of ``chunk_rows``, each
chunk encoded by msgspec (``adapters.datasources.common.encoding``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from itertools import starmap
from typing import Any, TypeVar, Unpack

import aiomysql
import msgspec
import pymysql

from adapters.datasources.common.encoding import paused_gc
from adapters.datasources.common.pools import SimplePool
from adapters.datasources.common.reader_base import PooledReader, ReaderSettings
from adapters.datasources.mysql.connection import close, connect, unavailable
from adapters.datasources.mysql.statements import (
    DISCOVER_SQL,
    MARIADB_JSON_SQL,
    Statement,
    discovered_schema,
    select_statement,
)
from application.errors import DatasourceQueryFailed
from application.ports.datasource_reader import RowChunk
from domain.connection import Endpoint
from domain.schema import Schema, TableRead

_BEGIN_SQL = (
    "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ",
    "START TRANSACTION READ ONLY, WITH CONSISTENT SNAPSHOT",
)
_QUERY_ERRORS = (pymysql.err.MySQLError, OSError, TimeoutError, asyncio.IncompleteReadError)


class _LostSession(Exception):
    """A kept session turned out closed (the server's ``wait_timeout``, a restart, a KILL)."""


def _lost(error: BaseException) -> bool:
    if isinstance(error, asyncio.IncompleteReadError | ConnectionError):
        return True
    code = error.args[0] if error.args else None
    return isinstance(error, pymysql.err.OperationalError) and code in (2006, 2013)


def _drop(connection: aiomysql.Connection) -> None:
    connection.close()


_Pool = SimplePool[aiomysql.Connection]
T = TypeVar("T")


class MySqlReader(PooledReader[Statement, _Pool, aiomysql.Connection]):
    """Reads MySQL and MariaDB datasources. Discovery and extraction of a stored connection
    lease a connection from its pool (``common.pools``); ``test`` always opens a fresh one."""

    # The connections of ``connection``: its errors, connect and close.
    _unavailable = staticmethod(unavailable)
    _connect = staticmethod(connect)
    _close = staticmethod(close)

    def __init__(self, **settings: Unpack[ReaderSettings]) -> None:
        super().__init__(**settings)
        self._encoder = msgspec.json.Encoder()

    async def _ping(self, connection: aiomysql.Connection) -> None:
        async with connection.cursor() as cursor:
            await cursor.execute("SELECT 1")
            await cursor.fetchall()

    async def _open_pool(self, endpoint: Endpoint, size: int, idle_seconds: float) -> _Pool:
        return SimplePool(
            lambda: connect(endpoint, self._connect_timeout),
            close,
            _drop,
            size=size,
            idle_seconds=idle_seconds,
        )

    async def _close_pool(self, pool: _Pool) -> None:
        await pool.close()

    async def _on_lease(
        self, endpoint: Endpoint, work: Callable[[aiomysql.Connection], Awaitable[T]]
    ) -> T:
        """As on every pooled reader, but once more, at once, on a new connection when a kept
        session turned out closed (not a retry library's loop)."""
        try:
            return await super()._on_lease(endpoint, work)
        except _QUERY_ERRORS as error:
            if not _lost(error):
                raise
        return await super()._on_lease(endpoint, work)

    async def discover(self, endpoint: Endpoint, scope: Sequence[str]) -> Schema:
        """Base tables of the connected database; ``scope`` is ignored (reference §3.8)."""

        async def read(connection: aiomysql.Connection) -> tuple[Any, Sequence[tuple[str, str]]]:
            async with connection.cursor() as cursor:
                await cursor.execute(DISCOVER_SQL)
                records = await cursor.fetchall()
                checks: Sequence[tuple[str, str]] = ()
                if "mariadb" in connection.get_server_info().lower():
                    await cursor.execute(MARIADB_JSON_SQL)
                    checks = await cursor.fetchall()
            return records, checks

        records, checks = await self._discovered(endpoint, read)
        return discovered_schema(records, checks)

    def statement(self, endpoint: Endpoint, read: TableRead) -> Statement | None:
        return select_statement(endpoint, read)

    @asynccontextmanager
    async def _session(self, endpoint: Endpoint) -> AsyncIterator[aiomysql.Connection]:
        """A leased connection in one ``REPEATABLE READ`` read-only transaction with a
        consistent snapshot, committed after the last step."""
        # A lease that ends early or with an error drops its connection (``_drop``): an
        # unbuffered result would have to be read to its end before the session is usable.
        # Not a retry library's loop: one more try, at once, only when a kept session was closed
        # (before anything was read).
        for attempt in (1, 2):
            try:
                async with self._pools.connection(endpoint) as connection:
                    try:
                        async with asyncio.timeout(self._query_timeout):
                            async with connection.cursor() as cursor:
                                for sql in _BEGIN_SQL:
                                    await cursor.execute(sql)
                    except _QUERY_ERRORS as error:
                        if attempt == 1 and _lost(error):
                            raise _LostSession() from error  # drops it; once more on a new one
                        raise DatasourceQueryFailed() from error
                    yield connection
                    try:
                        async with asyncio.timeout(self._query_timeout):
                            await connection.commit()  # ends the snapshot; reusable again
                    except _QUERY_ERRORS as error:
                        raise DatasourceQueryFailed() from error
                    return
            except _LostSession:
                continue

    async def _stream(
        self, connection: aiomysql.Connection, statement: Statement
    ) -> AsyncGenerator[RowChunk, None]:
        encode = self._encoder.encode
        row = statement.row
        size = self._chunk_rows
        try:
            cursor = await connection.cursor(aiomysql.SSCursor)
            async with asyncio.timeout(self._query_timeout):
                await cursor.execute(statement.sql, statement.params)
            while True:
                with paused_gc():
                    async with asyncio.timeout(self._query_timeout):
                        records = await cursor.fetchmany(size)
                    count = len(records)
                    data = encode(list(starmap(row, records)))[1:-1] if count else b""
                    del records
                if count:
                    yield RowChunk(result_key=statement.result_key, data=data, rows=count)
                if count < size:
                    break
            await cursor.close()
        except _QUERY_ERRORS as error:
            raise DatasourceQueryFailed() from error
        except (ValueError, TypeError) as error:
            raise DatasourceQueryFailed("failed to read datasource rows") from error
