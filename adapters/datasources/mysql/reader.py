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
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from itertools import starmap
from typing import Any, Unpack

import aiomysql
import msgspec
import pymysql

from adapters.datasources.common.encoding import paused_gc
from adapters.datasources.common.pools import ConnectionPools, SimplePool
from adapters.datasources.common.reader_base import (
    EngineReader,
    ReaderSettings,
    discovery_failed,
    on_connection,
)
from adapters.datasources.mysql.connection import close, connect, unavailable
from adapters.datasources.mysql.statements import (
    DISCOVER_SQL,
    MARIADB_JSON_SQL,
    Statement,
    discovered_schema,
    select_statement,
)
from application.errors import DatasourceQueryFailed
from application.ports.datasource_reader import PreparedReads, RowChunk
from domain.connection import Endpoint
from domain.errors import FetcherError
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


async def _close_pool(pool: SimplePool[aiomysql.Connection]) -> None:
    await pool.close()


class MySqlReader(EngineReader[Statement]):
    """Reads MySQL and MariaDB datasources. Discovery and extraction of a stored connection
    lease a connection from its pool (``common.pools``); ``test`` always opens a fresh one."""

    def __init__(self, **settings: Unpack[ReaderSettings]) -> None:
        super().__init__(**settings)
        self._encoder = msgspec.json.Encoder()
        timeout = self._connect_timeout

        async def open_pool(
            endpoint: Endpoint, size: int, idle: float
        ) -> SimplePool[aiomysql.Connection]:
            return SimplePool(
                lambda: connect(endpoint, timeout),
                close,
                _drop,
                size=size,
                idle_seconds=idle,
            )

        self._pools: ConnectionPools[SimplePool[aiomysql.Connection], aiomysql.Connection] = (
            ConnectionPools(
                open_pool=open_pool,
                close_pool=_close_pool,
                connect=lambda endpoint: connect(endpoint, timeout),
                close=close,
                failure=unavailable,
                size=self._pool_size,
                idle_seconds=self._pool_idle_seconds,
            )
        )

    @property
    def pools(self) -> ConnectionPools[SimplePool[aiomysql.Connection], aiomysql.Connection]:
        return self._pools

    async def aclose(self) -> None:
        await self._pools.aclose()

    async def test(self, endpoint: Endpoint, timeout: float) -> None:
        async def ping(connection: aiomysql.Connection) -> None:
            async with connection.cursor() as cursor:
                await cursor.execute("SELECT 1")
                await cursor.fetchall()

        await on_connection(
            lambda: connect(endpoint, timeout), ping, close, timeout=timeout, failure=unavailable
        )

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

        try:
            async with asyncio.timeout(self._discover_timeout):
                # Not a retry library's loop: one more try, at once, only when a kept session
                # turned out closed.
                for attempt in (1, 2):
                    try:
                        async with self._pools.connection(endpoint) as connection:
                            records, checks = await read(connection)
                        break
                    except _QUERY_ERRORS as error:
                        if attempt == 2 or not _lost(error):  # else: a closed kept session
                            raise
        except FetcherError:
            raise
        except Exception as error:
            raise discovery_failed(error) from error
        return discovered_schema(records, checks)

    def statement(self, endpoint: Endpoint, read: TableRead) -> Statement | None:
        return select_statement(endpoint, read)

    async def stream(
        self, endpoint: Endpoint, prepared: PreparedReads[Statement]
    ) -> AsyncGenerator[RowChunk, None]:
        statements = prepared.steps
        if not statements:
            return
        # A lease that ends early or with an error drops its connection (``_drop``): an
        # unbuffered result would have to be read to its end before the session is usable.
        # Not a retry library's loop: one more try, at once, only when a kept session was closed.
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
                    for statement in statements:
                        async with aclosing(self._stream(connection, statement)) as chunks:
                            async for chunk in chunks:
                                yield chunk
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
