"""PostgreSQL datasource reader on asyncpg: connection test, discovery, streamed extraction.

Statements are built with SQLAlchemy Core (quoted identifiers, bound ``$n`` parameters) and run
on asyncpg directly: one ``REPEATABLE READ READ ONLY`` transaction per extraction (all tables of
a job see one snapshot), a server-side cursor read in chunks of ``chunk_rows``, each chunk
encoded by msgspec through a struct type built once per table. Nothing from a request reaches
the SQL text except catalog-checked identifiers through SQLAlchemy's quoting.

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

import asyncio
import gc
import math
import ssl
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from functools import cache
from itertools import starmap
from typing import Any
from typing import cast as typing_cast

import asyncpg
import msgspec
from sqlalchemy import and_, cast, select, table
from sqlalchemy import column as sql_column
from sqlalchemy.dialects.postgresql import ARRAY, TEXT, TIMESTAMP
from sqlalchemy.dialects.postgresql.base import PGDialect
from sqlalchemy.engine.interfaces import BindTyping
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import ClauseElement, ColumnElement

from adapters.datasources.encoding import row_builder
from adapters.datasources.sql_filters import LIKE_ESCAPE, FilterRules, Kind, filter_clauses
from adapters.datasources.sql_values import Unconvertible, type_name
from adapters.datasources.tls import client_context, load_client_certificate
from application.errors import (
    DatasourceError,
    DatasourceQueryFailed,
    DatasourceUnavailable,
    InvalidSslMode,
)
from application.ports.datasource_reader import DatasourceReader, RowChunk
from domain.connection import DEFAULT_SCHEMA, DatabaseType, Endpoint
from domain.errors import FetcherError, InvalidRequest
from domain.schema import Column, Schema, Table, TableRead

DEFAULT_SCHEMA_NAME = DEFAULT_SCHEMA[DatabaseType.POSTGRESQL]
SYSTEM_PREFIXES = ("pg_", "information_schema")

_DISCOVER_SQL = """
SELECT t.table_schema, t.table_name, c.column_name, c.data_type, c.udt_name
FROM information_schema.tables AS t
LEFT JOIN information_schema.columns AS c
  ON c.table_schema = t.table_schema AND c.table_name = t.table_name
WHERE t.table_type = 'BASE TABLE' AND t.table_schema = ANY($1::text[])
ORDER BY t.table_schema, t.table_name, c.ordinal_position
"""
_BEGIN_SQL = (
    "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; "
    "SET LOCAL TimeZone TO 'UTC'; SET LOCAL IntervalStyle TO 'iso_8601'; "
    "SET LOCAL extra_float_digits TO 3"
)

# Types whose asyncpg value msgspec encodes as documented above, as they come. Everything else is
# cast on the server: numeric and uuid to text (same JSON, far less Python work per value than
# Decimal/UUID objects, and numeric keeps its exact digits without exponents), timestamps to
# timestamptz (the transaction runs in UTC), anything else to its text form.
# fmt: off
_NATIVE = frozenset({
    "smallint", "integer", "bigint", "real", "double precision", "boolean", "text",
    "character varying", "character", "name", "date", "timestamp with time zone",
    "time without time zone", "time with time zone", "bytea", "json", "jsonb",
    "_int2", "_int4", "_int8", "_float4", "_float8", "_bool", "_text", "_varchar", "_bpchar",
    "_name", "_date", "_timestamptz", "_time", "_timetz", "_bytea", "_json", "_jsonb",
})
# fmt: on
_FLOAT_TYPES = frozenset({"real", "double precision", "_float4", "_float8"})
_JSON_TYPES = frozenset({"json", "jsonb", "_json", "_jsonb"})


def _float_or_text(text: str) -> float | str:
    value = float(text)
    return value if math.isfinite(value) else text


def ssl_argument(endpoint: Endpoint) -> bool | str | ssl.SSLContext:
    """asyncpg's ``ssl`` argument for the endpoint's mode (reference §3.3, CA/cert/key applied)."""
    mode = endpoint.ssl_mode
    if mode in ("", "disable"):
        return False
    if mode in ("allow", "prefer"):
        return "prefer"
    if mode == "require":
        context = client_context(verify=False)
    elif mode in ("verify-ca", "verify-full"):
        context = client_context(
            verify=True, ca=endpoint.ssl_ca, check_hostname=mode == "verify-full"
        )
    else:
        raise InvalidSslMode(mode)
    if endpoint.ssl_cert:
        load_client_certificate(context, endpoint.ssl_cert, endpoint.ssl_key)
    return context


_NO_COLLATION = frozenset({'"char"'})


class PostgresRules(FilterRules):
    """Exact text on PostgreSQL: equality is already exact under deterministic collations;
    ordering uses ``COLLATE "C"`` (code point order in UTF-8 databases, whatever the column's
    collation); ``citext`` compares as ``text``; text with NUL characters cannot be bound."""

    def bind(self, kind: Kind, data_type: str, value: Any) -> Any:
        if isinstance(value, str) and "\x00" in value:
            raise Unconvertible("a string without NUL characters")
        return value

    def compared(
        self, column: ColumnElement[Any], kind: Kind, data_type: str
    ) -> ColumnElement[Any]:
        if type_name(data_type) == "citext":
            return cast(column, TEXT)
        return super().compared(column, kind, data_type)

    def ordered(self, column: ColumnElement[Any], kind: Kind, data_type: str) -> ColumnElement[Any]:
        target = self.compared(column, kind, data_type)
        if kind in (Kind.TEXT, Kind.OTHER) and type_name(data_type) not in _NO_COLLATION:
            return target.collate("C")
        return target

    def like(
        self, column: ColumnElement[Any], kind: Kind, data_type: str, pattern: str
    ) -> ColumnElement[bool]:
        if type_name(data_type) == "citext":
            return cast(column, TEXT).like(pattern, escape=LIKE_ESCAPE)
        return super().like(column, kind, data_type, pattern)


RULES = PostgresRules()


@dataclass(frozen=True, slots=True)
class _Statement:
    result_key: str
    sql: str
    params: tuple[Any, ...]
    row: Callable[..., Any]


class _SqlDialect(PGDialect):
    """PostgreSQL SQL with asyncpg's ``$n`` placeholders and no bind casts: the server infers
    each parameter's type from the column it is compared with."""

    bind_typing = BindTyping.NONE


@cache
def _dialect() -> _SqlDialect:
    return _SqlDialect(paramstyle="numeric_dollar")


def to_asyncpg(statement: ClauseElement) -> tuple[str, tuple[Any, ...]]:
    """SQL text with ``$n`` placeholders and the positional values, as asyncpg takes them."""
    compiled = typing_cast(
        SQLCompiler,
        statement.compile(dialect=_dialect(), compile_kwargs={"render_postcompile": True}),
    )
    return compiled.string, tuple(compiled.params[name] for name in compiled.positiontup or ())


def _output(column: ColumnElement[Any], data_type: str) -> ColumnElement[Any]:
    if data_type in _NATIVE:
        return column
    if data_type == "timestamp without time zone":
        return cast(column, TIMESTAMP(timezone=True))
    if data_type == "_timestamp":
        return cast(column, ARRAY(TIMESTAMP(timezone=True)))
    if data_type.startswith("_"):
        return cast(column, ARRAY(TEXT))
    return cast(column, TEXT)


class PostgresReader(DatasourceReader):
    """Reads PostgreSQL datasources. Holds no connection between calls."""

    def __init__(
        self,
        *,
        connect_timeout: float = 10.0,
        discover_timeout: float = 30.0,
        query_timeout: float = 120.0,
        chunk_rows: int = 10_000,
    ) -> None:
        self._connect_timeout = connect_timeout
        self._discover_timeout = discover_timeout
        self._query_timeout = query_timeout
        self._chunk_rows = chunk_rows
        self._encoder = msgspec.json.Encoder()

    async def _connect(self, endpoint: Endpoint, connect_timeout: float) -> asyncpg.Connection:
        tls = ssl_argument(endpoint)
        try:
            return await asyncpg.connect(
                host=endpoint.host,
                port=endpoint.port,
                user=endpoint.user_name,
                password=endpoint.password,
                database=endpoint.database_name,
                ssl=tls,
                timeout=connect_timeout,
                statement_cache_size=0,
                server_settings={"application_name": "fetcher"},
            )
        except FetcherError:
            raise
        except Exception as error:
            raise DatasourceUnavailable("failed to connect to datasource") from error

    @staticmethod
    async def _close(connection: asyncpg.Connection) -> None:
        try:
            await connection.close(timeout=5)
        except Exception:
            connection.terminate()
        except BaseException:
            connection.terminate()
            raise

    async def test(self, endpoint: Endpoint, timeout: float) -> None:
        try:
            async with asyncio.timeout(timeout):
                connection = await self._connect(endpoint, timeout)
                try:
                    await connection.fetchval("SELECT 1")
                finally:
                    await self._close(connection)
        except FetcherError:
            raise
        except Exception as error:
            raise DatasourceUnavailable("failed to connect to datasource") from error

    async def discover(self, endpoint: Endpoint, scope: Sequence[str]) -> Schema:
        schemas = list(scope) or [endpoint.schema or DEFAULT_SCHEMA_NAME]
        try:
            async with asyncio.timeout(self._discover_timeout):
                connection = await self._connect(endpoint, self._connect_timeout)
                try:
                    records = await connection.fetch(_DISCOVER_SQL, schemas)
                finally:
                    await self._close(connection)
        except FetcherError:
            raise
        except Exception as error:
            raise DatasourceError(
                "failed to discover datasource schema", stage="discover"
            ) from error
        columns: dict[tuple[str, str], list[Column]] = {}
        for schema_name, table_name, column_name, data_type, udt_name in records:
            found = columns.setdefault((schema_name, table_name), [])
            if column_name is not None:
                kind = udt_name if data_type in ("ARRAY", "USER-DEFINED") else data_type
                found.append(Column(name=column_name, data_type=kind.lower()))
        tables: dict[str, Table] = {}
        for (schema_name, table_name), table_columns in columns.items():
            key = (
                table_name if schema_name == DEFAULT_SCHEMA_NAME else f"{schema_name}.{table_name}"
            )
            if key.startswith(SYSTEM_PREFIXES):
                continue
            tables[key] = Table(schema=schema_name, name=table_name, columns=tuple(table_columns))
        return Schema(tables=tables)

    def _statement(self, endpoint: Endpoint, read: TableRead) -> _Statement | None:
        chosen = {c.name: c for c in read.columns}
        names = sorted(chosen)
        if not names:
            return None
        wanted = set(names) | set(read.filters)
        source = table(
            read.table.name, *(sql_column(n) for n in sorted(wanted)), schema=read.table.schema
        )
        outputs = [_output(source.c[n], chosen[n].data_type).label(n) for n in names]
        clauses: list[ColumnElement[bool]] = []
        for field, condition in read.filters.items():
            column = read.table.column(field)
            where = f"'{read.result_key}.{field}' of database '{endpoint.database_name}'"
            if column is None:
                raise InvalidRequest(f"filter on {where}: the field is not a column of the table")
            clauses.extend(
                filter_clauses(
                    source.c[field], column.data_type, condition, where=where, rules=RULES
                )
            )
        query = select(*outputs).select_from(source)
        if clauses:
            query = query.where(and_(*clauses))
        sql, params = to_asyncpg(query)
        return _Statement(read.result_key, sql, params, row_builder(names))

    def extract(self, endpoint: Endpoint, reads: Sequence[TableRead]) -> AsyncIterator[RowChunk]:
        """Builds every statement now (a filter value that does not convert raises
        ``InvalidRequest`` here, before any I/O), then streams them."""
        statements = [s for s in (self._statement(endpoint, r) for r in reads) if s is not None]
        types = {c.data_type for read in reads for c in read.columns}
        return self._run(endpoint, statements, types)

    async def _run(
        self, endpoint: Endpoint, statements: list[_Statement], types: set[str]
    ) -> AsyncGenerator[RowChunk, None]:
        if not statements:
            return
        connection = await self._connect(endpoint, self._connect_timeout)
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
            await self._close(connection)

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
        self, connection: asyncpg.Connection, statement: _Statement
    ) -> AsyncGenerator[RowChunk, None]:
        encode = self._encoder.encode
        row = statement.row
        size = self._chunk_rows
        try:
            cursor = await connection.cursor(
                statement.sql, *statement.params, timeout=self._query_timeout
            )
            while True:
                # The cyclic GC is paused while this table's chunk is fetched and encoded (tens
                # of thousands of short-lived objects), never while the consumer holds control.
                paused = gc.isenabled()
                gc.disable()
                try:
                    records = await cursor.fetch(size, timeout=self._query_timeout)
                    count = len(records)
                    data = encode(list(starmap(row, records)))[1:-1] if count else b""
                    del records
                finally:
                    if paused:
                        gc.enable()
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
