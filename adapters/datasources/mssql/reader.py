"""SQL Server datasource reader through aioodbc: connection test, discovery, streamed extraction.

Connection strings and SSL modes: ``mssql_connection``. Statements and discovery:
``mssql_statements``. Row encoding (the common result format): ``mssql_values``. Filters:
``mssql_filters``. Each statement is read with ``fetchmany`` in chunks of ``chunk_rows``, each
chunk encoded by ``adapters.datasources.common.encoding.RowEncoder``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import aclosing
from typing import Any, Unpack

from adapters.datasources.mssql.connection import (
    DEFAULT_DRIVER,
    MICROSOFT_DRIVER,
    connection_string,
)
from adapters.datasources.mssql.statements import (
    DEFAULT_SCHEMA_NAME,
    Statement,
    discovery_statement,
    is_system,
    select_statement,
    table_key,
)
from adapters.datasources.common.reader_base import (
    EngineReader,
    ReaderSettings,
    discovery_failed,
    encoded_chunks,
    on_connection,
    unavailable,
)
from application.errors import DatasourceQueryFailed, DatasourceUnavailable
from application.ports.datasource_reader import RowChunk
from domain.connection import Endpoint
from domain.errors import FetcherError
from domain.schema import Column, Schema, Table, TableRead


class SqlServerReader(EngineReader):
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
            import aioodbc  # loads the ODBC driver manager (unixODBC) only when dialling

            async with asyncio.timeout(timeout + 1):
                return await aioodbc.connect(
                    dsn=connection_string(endpoint, self.driver()),
                    autocommit=True,
                    timeout=max(1, int(timeout)),
                    after_created=configure,
                )
        except FetcherError:
            raise
        except Exception as error:
            raise DatasourceUnavailable("failed to connect to datasource") from error

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
        columns: dict[tuple[str, str], list[Column]] = {}
        for schema_name, table_name, column_name, data_type in records:
            found = columns.setdefault((schema_name, table_name), [])
            if column_name is not None:
                found.append(Column(name=column_name, data_type=data_type.lower()))
        return Schema(
            tables={
                table_key(schema_name, table_name): Table(
                    schema=schema_name, name=table_name, columns=tuple(table_columns)
                )
                for (schema_name, table_name), table_columns in columns.items()
                if not is_system(schema_name, table_name)
            }
        )

    def extract(self, endpoint: Endpoint, reads: Sequence[TableRead]) -> AsyncIterator[RowChunk]:
        """Builds every statement now (a filter value that does not convert raises
        ``InvalidRequest`` here, before any I/O), then streams them."""
        statements = [s for s in (select_statement(endpoint, r) for r in reads) if s is not None]
        return self._run(endpoint, statements)

    async def _run(
        self, endpoint: Endpoint, statements: list[Statement]
    ) -> AsyncGenerator[RowChunk, None]:
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
