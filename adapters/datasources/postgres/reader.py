"""PostgreSQL datasource reader on asyncpg: connection test, discovery, streamed extraction.

Connection and SSL modes: ``postgres_connection``. Discovery, statements and filters:
``postgres_statements``. Statements run on asyncpg directly: one ``REPEATABLE READ READ ONLY``
transaction per extraction (all tables of a job see one snapshot), a server-side cursor read in
chunks of ``chunk_rows``, each chunk encoded by msgspec through a struct type built once per
table (``adapters.datasources.common.encoding``).

Row encoding (one JSON object per row, keys sorted by code point = UTF-8 byte order):

=============================  ===================================================================
PostgreSQL type                JSON value
=============================  ===================================================================
smallint, integer, bigint      number (exact digits)
numeric / decimal              string with the exact digits (``"12.50"``, ``"NaN"``)
real, double precision         number, shortest round-trip; NaN/±Infinity as ``"NaN"``,
                               ``"Infinity"``, ``"-Infinity"``
boolean                        ``true`` / ``false``
text, varchar, char, name      string
date                           ``"YYYY-MM-DD"``
timestamp with time zone       RFC 3339 in UTC, ``"2024-01-02T03:04:05Z"``; fractions as 6 digits
                               when non-zero (``"...05.120000Z"``)
timestamp without time zone    read as UTC, same form as above
time [with time zone]          ``"HH:MM:SS[.ffffff]"`` [+ offset]
uuid                           canonical lower-case string
bytea                          standard base64 string
json, jsonb                    embedded as JSON, server text copied verbatim (never parsed)
arrays (of the types above)    JSON arrays (nested for several dimensions); timestamp arrays as
                               UTC; arrays of any other element type as arrays of strings
interval                       ISO 8601 duration string (``"P1Y2M3DT4H5M6.5S"``), exact months
anything else                  PostgreSQL's text form (money, inet, ranges, enums, geometric,
                               bit strings, xml, user types, ...)
NULL                           ``null``
=============================  ===================================================================

Limits of the driver's date/time mapping: ``±infinity`` timestamps come out as
``9999-12-31T23:59:59.999999`` / ``0001-01-01T00:00:00`` (no ``Z``), ``infinity`` dates as
``9999-12-31``; BC dates and ``24:00:00`` times cannot be read and fail the query.

Strings are plain JSON escapes (msgspec): non-ASCII is raw UTF-8, ``<>&`` are not escaped.
Tables without rows yield nothing (reference §10.3 item 26).

Filters (``sql_filters`` with ``PostgresRules``) mean the same as on every engine: text compares
exactly and orders by code point (``COLLATE "C"``), ``like`` is case-sensitive.
"""

from __future__ import annotations

import math
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import aclosing
from itertools import starmap
from typing import Unpack

import asyncpg
import msgspec

from adapters.datasources.common.encoding import paused_gc
from adapters.datasources.postgres.connection import close, connect
from adapters.datasources.postgres.statements import (
    DEFAULT_SCHEMA_NAME,
    DISCOVER_SQL,
    Statement,
    discovered_schema,
    select_statement,
)
from adapters.datasources.common.reader_base import (
    EngineReader,
    ReaderSettings,
    discovery_failed,
    on_connection,
    unavailable,
)
from application.errors import DatasourceQueryFailed
from application.ports.datasource_reader import RowChunk
from domain.connection import Endpoint
from domain.schema import Schema, TableRead

_BEGIN_SQL = (
    "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; "
    "SET LOCAL TimeZone TO 'UTC'; SET LOCAL IntervalStyle TO 'iso_8601'; "
    "SET LOCAL extra_float_digits TO 3"
)

_FLOAT_TYPES = frozenset({"real", "double precision", "_float4", "_float8"})
_JSON_TYPES = frozenset({"json", "jsonb", "_json", "_jsonb"})


def _float_or_text(text: str) -> float | str:
    value = float(text)
    return value if math.isfinite(value) else text


class PostgresReader(EngineReader):
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

    def _statement(self, endpoint: Endpoint, read: TableRead) -> Statement | None:
        return select_statement(endpoint, read)

    def extract(self, endpoint: Endpoint, reads: Sequence[TableRead]) -> AsyncIterator[RowChunk]:
        """Builds every statement now (a filter value that does not convert raises
        ``InvalidRequest`` here, before any I/O), then streams them."""
        statements = [s for s in (select_statement(endpoint, r) for r in reads) if s is not None]
        types = {c.data_type for read in reads for c in read.columns}
        return self._run(endpoint, statements, types)

    async def _run(
        self, endpoint: Endpoint, statements: list[Statement], types: set[str]
    ) -> AsyncGenerator[RowChunk, None]:
        if not statements:
            return
        connection = await connect(endpoint, self._connect_timeout)
        try:
            try:
                await self._register_codecs(connection, types)
                await connection.execute(_BEGIN_SQL, timeout=self._query_timeout)
            except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError) as error:
                raise DatasourceQueryFailed() from error
            for statement in statements:
                async with aclosing(self._stream(connection, statement)) as chunks:
                    async for chunk in chunks:
                        yield chunk
        finally:
            await close(connection)

    @staticmethod
    async def _register_codecs(connection: asyncpg.Connection, types: set[str]) -> None:
        if types & _FLOAT_TYPES:
            for name in ("float4", "float8"):
                await connection.set_type_codec(
                    name, schema="pg_catalog", encoder=repr, decoder=_float_or_text, format="text"
                )
        if types & _JSON_TYPES:
            for name in ("json", "jsonb"):
                await connection.set_type_codec(
                    name, schema="pg_catalog", encoder=str, decoder=msgspec.Raw, format="text"
                )

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
