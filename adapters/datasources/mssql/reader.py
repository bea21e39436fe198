"""SQL Server datasource reader through aioodbc: connection test, discovery, streamed extraction.

Connection strings and SSL modes: ``connection``. Statements, discovery and filters:
``statements``. Row encoding (the common result format): ``values``. Each statement is read with
``fetchmany`` in chunks of ``chunk_rows``, each chunk encoded by
``adapters.datasources.common.encoding.RowEncoder``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from typing import Any, Unpack

from adapters.datasources.common.failures import unavailable
from adapters.datasources.common.reader_base import (
    EngineReader,
    ReaderSettings,
    discovery_failed,
    encoded_chunks,
    on_connection,
)
from adapters.datasources.mssql.connection import (
    DEFAULT_DRIVER,
    MICROSOFT_DRIVER,
    connection_string,
)
from adapters.datasources.mssql.statements import (
    DEFAULT_SCHEMA_NAME,
    Statement,
    discovered_schema,
    discovery_statement,
    select_statement,
)
from application.errors import DatasourceQueryFailed
from application.ports.datasource_reader import PreparedReads, RowChunk
from domain.connection import Endpoint
from domain.errors import FetcherError
from domain.schema import Schema, TableRead


class SqlServerReader(EngineReader[Statement]):
    """Reads SQL Server datasources. Holds no connection between calls.

    ``driver`` names the ODBC driver; ``None`` picks Microsoft's driver 18 when it is installed,
    else FreeTDS.
    """

    def __init__(self, *, driver: str | None = None, **settings: Unpack[ReaderSettings]) -> None:
        super().__init__(**settings)
        self._driver = driver

    def driver(self) -> str:
        if self._driver is None:
            import pyodbc

            installed = pyodbc.drivers()
            self._driver = MICROSOFT_DRIVER if MICROSOFT_DRIVER in installed else DEFAULT_DRIVER
        return self._driver

    async def _connect(self, endpoint: Endpoint, timeout: float) -> Any:
        query_timeout = max(1, int(self._query_timeout))

        async def configure(connection: Any) -> None:
            connection.timeout = query_timeout  # pyodbc's per-statement timeout, in seconds

        try:
            # The settings are checked before the ODBC driver manager (unixODBC) is loaded.
            dsn = connection_string(endpoint, self.driver())
            import aioodbc

            async with asyncio.timeout(timeout + 1):
                return await aioodbc.connect(
                    dsn=dsn,
                    autocommit=True,
                    timeout=max(1, int(timeout)),
                    after_created=configure,
                )
        except FetcherError:
            raise
        except Exception as error:
            raise unavailable(error) from error

    @staticmethod
    async def _close(connection: Any) -> None:
        try:
            await connection.close()
        except Exception:
            pass

    async def test(self, endpoint: Endpoint, timeout: float) -> None:
        async def ping(connection: Any) -> None:
            cursor = await connection.execute("SELECT 1")
            await cursor.fetchone()
            await cursor.close()

        await on_connection(
            lambda: self._connect(endpoint, timeout),
            ping,
            self._close,
            timeout=timeout,
            failure=unavailable,
        )

    async def discover(self, endpoint: Endpoint, scope: Sequence[str]) -> Schema:
        schemas = list(scope) or [endpoint.schema or DEFAULT_SCHEMA_NAME]
        sql, params = discovery_statement(schemas)

        async def read(connection: Any) -> Any:
            cursor = await connection.execute(sql, *params)
            records = await cursor.fetchall()
            await cursor.close()
            return records

        records = await on_connection(
            lambda: self._connect(endpoint, self._connect_timeout),
            read,
            self._close,
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
        connection = await self._connect(endpoint, self._connect_timeout)
        try:
            for statement in statements:
                async with aclosing(self._stream(connection, statement)) as chunks:
                    async for chunk in chunks:
                        yield chunk
        finally:
            await self._close(connection)

    async def _stream(
        self, connection: Any, statement: Statement
    ) -> AsyncGenerator[RowChunk, None]:
        try:
            cursor = await connection.cursor()
        except Exception as error:
            raise DatasourceQueryFailed() from error
        try:
            chunks = encoded_chunks(
                lambda: cursor.execute(statement.sql, *statement.params),
                cursor.fetchmany,
                statement.encoder,
                statement.result_key,
                self._chunk_rows,
            )
            async with aclosing(chunks):
                async for chunk in chunks:
                    yield chunk
        finally:
            try:
                await cursor.close()
            except Exception:
                pass
