"""PostgreSQL datasource reader on asyncpg: connection test, discovery, streamed extraction.

Connection and SSL modes: ``connection``. Discovery, statements and filters: ``statements``.
Values in the common result format: ``values``. Statements run on asyncpg directly: one
``REPEATABLE READ READ ONLY`` transaction per extraction (all tables of a job see one snapshot), a
server-side cursor read in chunks of ``chunk_rows``, each chunk encoded by msgspec through a
struct type built once per table (``adapters.datasources.common.encoding``). Tables without rows
yield nothing (reference §10.3 item 26).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from itertools import starmap
from typing import Unpack

import asyncpg
import msgspec

from adapters.datasources.common.encoding import paused_gc
from adapters.datasources.common.reader_base import (
    EngineReader,
    ReaderSettings,
    discovery_failed,
    on_connection,
)
from adapters.datasources.postgres.connection import close, connect, unavailable
from adapters.datasources.postgres.statements import (
    DEFAULT_SCHEMA_NAME,
    DISCOVER_SQL,
    Statement,
    discovered_schema,
    select_statement,
)
from adapters.datasources.postgres.values import register_codecs
from application.errors import DatasourceQueryFailed
from application.ports.datasource_reader import PreparedReads, RowChunk
from domain.connection import Endpoint
from domain.schema import Schema, TableRead

_BEGIN_SQL = (
    "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; "
    "SET LOCAL TimeZone TO 'UTC'; SET LOCAL IntervalStyle TO 'iso_8601'; "
    "SET LOCAL extra_float_digits TO 3"
)


class PostgresReader(EngineReader[Statement]):
    """Reads PostgreSQL datasources. Holds no connection between calls."""

    def __init__(self, **settings: Unpack[ReaderSettings]) -> None:
        super().__init__(**settings)
        self._encoder = msgspec.json.Encoder()

    async def test(self, endpoint: Endpoint, timeout: float) -> None:
        await on_connection(
            lambda: connect(endpoint, timeout),
            lambda connection: connection.fetchval("SELECT 1"),
            close,
            timeout=timeout,
            failure=unavailable,
        )

    async def discover(self, endpoint: Endpoint, scope: Sequence[str]) -> Schema:
        schemas = list(scope) or [endpoint.schema or DEFAULT_SCHEMA_NAME]
        records = await on_connection(
            lambda: connect(endpoint, self._connect_timeout),
            lambda connection: connection.fetch(DISCOVER_SQL, schemas),
            close,
            timeout=self._discover_timeout,
            failure=discovery_failed,
        )
        return discovered_schema(records)

    def statement(self, endpoint: Endpoint, read: TableRead) -> Statement | None:
        return select_statement(endpoint, read)

    async def stream(
        self, endpoint: Endpoint, prepared: PreparedReads[Statement]
    ) -> AsyncGenerator[RowChunk, None]:
        statements = prepared.steps
        if not statements:
            return
        types: set[str] = set().union(*(statement.types for statement in statements))
        connection = await connect(endpoint, self._connect_timeout)
        try:
            try:
                await register_codecs(connection, types)
                await connection.execute(_BEGIN_SQL, timeout=self._query_timeout)
            except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError) as error:
                raise DatasourceQueryFailed() from error
            for statement in statements:
                async with aclosing(self._stream(connection, statement)) as chunks:
                    async for chunk in chunks:
                        yield chunk
        finally:
            await close(connection)

    async def _stream(
        self, connection: asyncpg.Connection, statement: Statement
    ) -> AsyncGenerator[RowChunk, None]:
        encode = self._encoder.encode
        row = statement.row
        size = self._chunk_rows
        try:
            cursor = await connection.cursor(
                statement.sql, *statement.params, timeout=self._query_timeout
            )
            while True:
                with paused_gc():
                    records = await cursor.fetch(size, timeout=self._query_timeout)
                    count = len(records)
                    data = encode(list(starmap(row, records)))[1:-1] if count else b""
                    del records
                if count:
                    yield RowChunk(result_key=statement.result_key, data=data, rows=count)
                if count < size:
                    return
        except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError) as error:
            raise DatasourceQueryFailed() from error
        except (ValueError, OverflowError) as error:  # asyncpg cannot decode BC dates, 24:00
            raise DatasourceQueryFailed(
                "failed to read datasource rows: a date/time value is outside Python's range"
            ) from error
