"""SQL Server datasource reader through aioodbc: connection test, discovery, streamed extraction.

Connection strings and SSL modes: ``connection``. Statements, discovery and filters:
``statements``. Row encoding (the common result format): ``values``. A ``ConnectingReader``
(``common.reader_base``): every call connects and closes after; each statement is read through
an aioodbc cursor by ``encoded_chunks``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from typing import Any, Unpack

from adapters.datasources.common.failures import unavailable
from adapters.datasources.common.reader_base import (
    ConnectingReader,
    ReaderSettings,
    encoded_chunks,
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
from application.ports.datasource_reader import RowChunk
from domain.connection import Endpoint
from domain.errors import FetcherError
from domain.schema import Schema, TableRead


class SqlServerReader(ConnectingReader[Statement, Any]):
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

    async def _ping(self, connection: Any) -> None:
        cursor = await connection.execute("SELECT 1")
        await cursor.fetchone()
        await cursor.close()

    async def discover(self, endpoint: Endpoint, scope: Sequence[str]) -> Schema:
        schemas = list(scope) or [endpoint.schema or DEFAULT_SCHEMA_NAME]
        sql, params = discovery_statement(schemas)

        async def read(connection: Any) -> Any:
            cursor = await connection.execute(sql, *params)
            records = await cursor.fetchall()
            await cursor.close()
            return records

        return discovered_schema(await self._discovered(endpoint, read))

    def statement(self, endpoint: Endpoint, read: TableRead) -> Statement | None:
        return select_statement(endpoint, read)

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
