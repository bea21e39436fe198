"""Oracle datasource reader through python-oracledb in thin mode (asyncio): connection test,
discovery, streamed extraction.

Connection arguments and SSL modes: ``connection``. Discovery, statements and filters:
``statements``; every extraction session first runs its ``SESSION_SQL`` (binary text
comparison). Row encoding (the common result format): ``values``. Connections are opened per
call (``common.reader_base.ConnectingReader``); a statement's cursor fetches ``chunk_rows`` rows a
round trip, read by ``encoded_chunks``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from typing import Any
from typing import cast as typing_cast

import oracledb

from adapters.datasources.common.failures import unavailable
from adapters.datasources.common.reader_base import ConnectingReader, encoded_chunks
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
from application.ports.datasource_reader import RowChunk
from domain.connection import Endpoint
from domain.schema import Schema, TableRead


class OracleReader(ConnectingReader[Statement, oracledb.AsyncConnection]):
    """Reads Oracle datasources. Holds no connection between calls; every extraction session
    first runs ``SESSION_SQL``."""

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

    async def _ping(self, connection: oracledb.AsyncConnection) -> None:
        await connection.ping()

    async def _begin(self, connection: oracledb.AsyncConnection) -> None:
        try:
            with connection.cursor() as cursor:
                await cursor.execute(SESSION_SQL)
        except Exception as error:
            raise DatasourceQueryFailed() from error

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

        user, records = await self._discovered(endpoint, read)
        return discovered_schema(records, user)

    def statement(self, endpoint: Endpoint, read: TableRead) -> Statement | None:
        return select_statement(endpoint, read)

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
