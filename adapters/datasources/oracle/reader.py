"""Oracle datasource reader through python-oracledb in thin mode (asyncio): connection test,
discovery, streamed extraction.

Connection arguments and SSL modes: ``oracle_connection``. Discovery and statements:
``oracle_statements``. Row encoding (the common result format): ``oracle_values``. Filters:
``oracle_filters``; every extraction session first runs its ``SESSION_SQL`` (binary text
comparison). Each statement is read with ``fetchmany`` in chunks of ``chunk_rows``, each chunk
encoded by ``adapters.datasources.common.encoding.RowEncoder``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import aclosing
from typing import Any
from typing import cast as typing_cast

import oracledb

from adapters.datasources.oracle.connection import connect_arguments
from adapters.datasources.oracle.filters import SESSION_SQL
from adapters.datasources.oracle.statements import (
    OracleColumn,
    Statement,
    discovery_statement,
    is_system,
    select_statement,
    table_key,
)
from adapters.datasources.oracle.values import column_type, output_type_handler
from adapters.datasources.common.reader_base import (
    EngineReader,
    discovery_failed,
    encoded_chunks,
    on_connection,
    unavailable,
)
from application.errors import DatasourceQueryFailed, DatasourceUnavailable
from application.ports.datasource_reader import RowChunk
from domain.connection import Endpoint
from domain.schema import Column, Schema, Table, TableRead


class OracleReader(EngineReader):
    """Reads Oracle datasources. Holds no connection between calls."""

    async def _connect(self, endpoint: Endpoint, timeout: float) -> oracledb.AsyncConnection:
        arguments = connect_arguments(endpoint, timeout)
        try:
            async with asyncio.timeout(timeout + 1):
                connection = await oracledb.connect_async(**arguments)
        except Exception as error:
            raise DatasourceUnavailable("failed to connect to datasource") from error
        finally:
            arguments.clear()
        connection.call_timeout = max(1, int(self._query_timeout * 1000))
        connection.outputtypehandler = output_type_handler
        return connection

    @staticmethod
    async def _close(connection: oracledb.AsyncConnection) -> None:
        try:
            await connection.close()
        except Exception:
            pass

    async def test(self, endpoint: Endpoint, timeout: float) -> None:
        await on_connection(
            lambda: self._connect(endpoint, timeout),
            lambda connection: connection.ping(),
            self._close,
            timeout=timeout,
            failure=unavailable,
        )

    async def discover(self, endpoint: Endpoint, scope: Sequence[str]) -> Schema:
        requested = [s.upper() for s in scope] or (
            [endpoint.schema.upper()] if endpoint.schema else []
        )

        async def read(connection: oracledb.AsyncConnection) -> tuple[str, list[Any]]:
            with connection.cursor() as cursor:
                await cursor.execute("SELECT USER FROM DUAL")
                (user,) = typing_cast(tuple[str], await cursor.fetchone())
                owners = list(dict.fromkeys([*requested, user]))
                sql, params = discovery_statement(owners)
                cursor.arraysize = 1_000
                await cursor.execute(sql, params)
                return user, await cursor.fetchall()

        user, records = await on_connection(
            lambda: self._connect(endpoint, self._connect_timeout),
            read,
            self._close,
            timeout=self._discover_timeout,
            failure=discovery_failed,
        )
        columns: dict[tuple[str, str], list[Column]] = {}
        for owner, table_name, column_name, data_type, precision, scale in records:
            if is_system(owner) or is_system(table_name):
                continue
            kind = column_type(data_type, precision, scale)
            columns.setdefault((owner, table_name), []).append(
                OracleColumn(name=column_name.upper(), data_type=kind, physical=column_name)
            )
        return Schema(
            tables={
                table_key(owner, name, user): Table(schema=owner, name=name, columns=tuple(found))
                for (owner, name), found in columns.items()
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
            try:
                with connection.cursor() as cursor:
                    await cursor.execute(SESSION_SQL)
            except Exception as error:
                raise DatasourceQueryFailed() from error
            for statement in statements:
                async with aclosing(self._stream(connection, statement)) as chunks:
                    async for chunk in chunks:
                        yield chunk
        finally:
            await self._close(connection)

    async def _stream(
        self, connection: oracledb.AsyncConnection, statement: Statement
    ) -> AsyncGenerator[RowChunk, None]:
        size = self._chunk_rows
        cursor = connection.cursor()

        async def execute() -> None:
            cursor.arraysize = size
            cursor.prefetchrows = size + 1
            await cursor.execute(statement.sql, statement.params, fetch_lobs=False)

        try:
            chunks = encoded_chunks(
                execute, cursor.fetchmany, statement.encoder, statement.result_key, size
            )
            async with aclosing(chunks):
                async for chunk in chunks:
                    yield chunk
        finally:
            cursor.close()
