"""Oracle datasource reader through python-oracledb in thin mode (asyncio): connection test,
discovery, streamed extraction.

Connection arguments and SSL modes: ``connection``. Discovery, statements and filters:
``statements``; every extraction session first runs its ``SESSION_SQL`` (binary text
comparison). Row encoding (the common result format): ``values``. Each statement is read with
``fetchmany`` in chunks of ``chunk_rows``, each chunk encoded by
``adapters.datasources.common.encoding.RowEncoder``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from typing import Any
from typing import cast as typing_cast

import oracledb

from adapters.datasources.common.failures import unavailable
from adapters.datasources.common.reader_base import (
    EngineReader,
    discovery_failed,
    encoded_chunks,
    on_connection,
)
from adapters.datasources.oracle.connection import connect_arguments
from adapters.datasources.oracle.statements import (
    SESSION_SQL,
    Statement,
    discovered_schema,
    discovery_statement,
    select_statement,
)
from adapters.datasources.oracle.values import output_type_handler
from application.errors import DatasourceQueryFailed
from application.ports.datasource_reader import PreparedReads, RowChunk
from domain.connection import Endpoint
from domain.schema import Schema, TableRead


class OracleReader(EngineReader[Statement]):
    """Reads Oracle datasources. Holds no connection between calls."""

    async def _connect(self, endpoint: Endpoint, timeout: float) -> oracledb.AsyncConnection:
        arguments = connect_arguments(endpoint, timeout)
        try:
            async with asyncio.timeout(timeout + 1):
                # oracledb's AsyncConnection.__await__ is unannotated; it yields the connection.
                connection: oracledb.AsyncConnection = await oracledb.connect_async(**arguments)
        except Exception as error:
            raise unavailable(error) from error
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
        return discovered_schema(records, user)

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
