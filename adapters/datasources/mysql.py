"""MySQL / MariaDB datasource reader on aiomysql: connection test, discovery, streamed extraction.

Connection (reference §3.2-3.3): host, port, user, password and database are keyword arguments
(no DSN, so any password works; it is sent as UTF-8, as MySQL hashed it). TLS modes: ``""`` /
``false`` none; ``true`` verified TLS (CA from the connection, else the system trust store, host
name checked); ``skip-verify`` TLS without verification; ``preferred`` TLS without verification
when the server offers it, else plain. ``true`` and ``skip-verify`` refuse a server that does not
offer TLS before sending any credential. A client certificate and key are used when given. Each
session runs with ``sql_mode = ''`` and ``time_zone = '+00:00'``.

Discovery: base tables of ``DATABASE()`` (none when that is a system schema), unqualified names,
columns in ordinal order with ``COLUMN_TYPE`` lower-cased (``int(11)``, ``decimal(18,2)``,
``tinyint(1)``, ``bigint(20) unsigned``), ``enum``/``set`` without their values, and ``json`` for
MySQL JSON columns and MariaDB's (``longtext`` with a ``json_valid`` check).

Extraction: one ``REPEATABLE READ`` read-only transaction with a consistent snapshot per job, each
statement built with SQLAlchemy Core (quoted identifiers, values bound by the driver's escaping)
and read through an unbuffered server-side cursor (``SSCursor``) in chunks of ``chunk_rows``.

Row encoding (the common result format, see ``postgres.py``):

=================================  ==============================================================
MySQL / MariaDB type               JSON value
=================================  ==============================================================
tinyint, smallint, mediumint,      number (exact digits, unsigned included)
int, bigint, year, bit(n > 1)
tinyint(1) / bool / boolean,       ``true`` / ``false`` (MySQL's BOOLEAN: zero is false, any other
bit(1)                             value true)
decimal / numeric                  string with the exact digits (``"12.50"``)
double                             number, shortest round-trip
float                              number, shortest text of the single-precision value (``1.1``)
char, varchar, text types, enum,   string
set, uuid, inet4, inet6
date                               ``"YYYY-MM-DD"``
datetime, timestamp                RFC 3339 in UTC, ``"2024-01-02T03:04:05Z"``; fractions as 6
                                   digits when non-zero; ``datetime`` is read as UTC, ``timestamp``
                                   is converted by the server (session time zone UTC)
time                               ``"HH:MM:SS[.ffffff]"`` (MySQL's range, ``-838:59:59`` up)
binary, varbinary, blob types      standard base64 string
json                               embedded as JSON, the server's text copied verbatim
geometry types                     WKT text (``"POINT(1 2)"``)
zero dates (``0000-00-00``, a      ``null``
zero month or day)
NULL                               ``null``
=================================  ==============================================================

Filters (``sql_filters``) mean the same as on PostgreSQL: text and ``other`` columns compare as
their UTF-8 bytes (exact, case-sensitive, no trailing-space padding, code point order); equality
with ASCII values also compares the column itself first, so an index can serve it; ``like`` runs
under ``utf8mb4_bin`` (case-sensitive, ``_`` is one character); BOOLEAN columns compare as
``col <> 0``; ``float`` columns compare with the value rounded to single precision.
"""

from __future__ import annotations

import asyncio
import gc
import ssl
import struct
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from functools import cache
from itertools import starmap
from typing import Any
from typing import cast as typing_cast

import aiomysql
import msgspec
import pymysql
from pymysql.constants import CLIENT, FIELD_TYPE
from pymysql.converters import decoders, through
from sqlalchemy import LargeBinary, and_, case, cast, func, literal, select, table
from sqlalchemy import column as sql_column
from sqlalchemy.dialects.mysql import CHAR
from sqlalchemy.dialects.mysql.base import MySQLDialect
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import ClauseElement, ColumnElement

from adapters.datasources.encoding import row_factory
from adapters.datasources.postgres import load_client_certificate
from adapters.datasources.sql_filters import (
    LIKE_ESCAPE,
    FilterRules,
    Kind,
    column_kind,
    filter_clauses,
)
from adapters.datasources.sql_values import Unconvertible, type_name
from application.errors import (
    DatasourceError,
    DatasourceQueryFailed,
    DatasourceUnavailable,
    InvalidSslMode,
)
from application.ports.datasource_reader import DatasourceReader, RowChunk
from domain.connection import Endpoint
from domain.errors import FetcherError, InvalidRequest
from domain.schema import Column, Schema, Table, TableRead

SYSTEM_SCHEMAS = frozenset({"mysql", "information_schema", "performance_schema", "sys"})

_DISCOVER_SQL = """
SELECT DATABASE(), t.TABLE_NAME, c.COLUMN_NAME, c.DATA_TYPE, c.COLUMN_TYPE
FROM information_schema.TABLES AS t
LEFT JOIN information_schema.COLUMNS AS c
  ON c.TABLE_SCHEMA = t.TABLE_SCHEMA AND c.TABLE_NAME = t.TABLE_NAME
WHERE t.TABLE_SCHEMA = DATABASE() AND t.TABLE_TYPE = 'BASE TABLE'
ORDER BY t.TABLE_NAME, c.ORDINAL_POSITION
"""
# MariaDB's JSON is LONGTEXT with a column-level CHECK (json_valid(`col`)).
_MARIADB_JSON_SQL = """
SELECT TABLE_NAME, CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS
WHERE CONSTRAINT_SCHEMA = DATABASE() AND LEVEL = 'Column'
"""
_SESSION_SQL = "SET SESSION sql_mode = '', time_zone = '+00:00'"
_BEGIN_SQL = (
    "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ",
    "START TRANSACTION READ ONLY, WITH CONSISTENT SNAPSHOT",
)

_BOOLEAN_TYPES = frozenset({"tinyint(1)", "tinyint(1) unsigned", "bit(1)", "bool", "boolean"})
_SPATIAL_TYPES = frozenset(
    {"geometry", "point", "linestring", "polygon", "multipoint", "multilinestring",
     "multipolygon", "geometrycollection", "geomcollection"}
)  # fmt: skip
_FLOAT32 = struct.Struct("<f")


def _wire_password(password: str) -> str:
    """aiomysql sends ``password.encode("latin-1")``; this makes those the UTF-8 bytes, which is
    what MySQL hashed when the password was set over a UTF-8 connection."""
    return password.encode("utf-8").decode("latin-1")


def tls_settings(endpoint: Endpoint) -> tuple[ssl.SSLContext | None, bool]:
    """(the TLS context, whether TLS is required) for the endpoint's mode (reference §3.3)."""
    mode = endpoint.ssl_mode
    if mode in ("", "false"):
        return None, False
    if mode == "true":
        context = ssl.create_default_context(cadata=endpoint.ssl_ca or None)
    elif mode in ("skip-verify", "preferred"):
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    else:
        raise InvalidSslMode(mode)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if endpoint.ssl_cert:
        load_client_certificate(context, endpoint.ssl_cert, endpoint.ssl_key)
    return context, mode != "preferred"


class _TlsNotOffered(Exception):
    pass


class _Connection(aiomysql.Connection):  # type: ignore[misc]
    """aiomysql's connection, except that it will not authenticate in plain text when TLS is
    required (aiomysql itself carries on without TLS when the server does not offer it)."""

    tls_required = False

    async def _request_authentication(self) -> None:
        if self.tls_required and not self.server_capabilities & CLIENT.SSL:
            raise _TlsNotOffered("the server does not offer TLS")
        await super()._request_authentication()


# --- values --------------------------------------------------------------------------------------


def _date_text(text: str) -> str | None:
    return None if text[5:7] == "00" or text[8:10] == "00" else text


def _datetime_text(text: str) -> str | None:
    if text[5:7] == "00" or text[8:10] == "00":
        return None
    fraction = text[20:].ljust(6, "0")
    if fraction != "000000":
        return f"{text[:10]}T{text[11:19]}.{fraction}Z"
    return f"{text[:10]}T{text[11:19]}Z"


def _time_text(text: str) -> str:
    head, _, fraction = text.partition(".")
    return f"{head}.{fraction.ljust(6, '0')}" if fraction.strip("0") else head


def _float32(value: float) -> float:
    packed = _FLOAT32.pack(value)
    for digits in range(6, 10):
        candidate = float(f"{value:.{digits}g}")
        try:
            if _FLOAT32.pack(candidate) == packed:
                return candidate
        except OverflowError:
            continue
    return value


_DECODERS: dict[int, Callable[[Any], Any]] = {
    **decoders,
    FIELD_TYPE.DECIMAL: through,
    FIELD_TYPE.NEWDECIMAL: through,
    FIELD_TYPE.DATE: _date_text,
    FIELD_TYPE.NEWDATE: _date_text,
    FIELD_TYPE.DATETIME: _datetime_text,
    FIELD_TYPE.TIMESTAMP: _datetime_text,
    FIELD_TYPE.TIME: _time_text,
    FIELD_TYPE.BIT: through,
    FIELD_TYPE.JSON: through,
}


# --- statements ----------------------------------------------------------------------------------


def _as_utf8(column: ColumnElement[Any]) -> ColumnElement[Any]:
    return cast(column, CHAR(charset="utf8mb4"))


def _as_bytes(column: ColumnElement[Any]) -> ColumnElement[Any]:
    return cast(_as_utf8(column), LargeBinary)


class MySqlRules(FilterRules):
    """The operators' common meaning on MySQL and MariaDB, whatever the columns' collations."""

    def kind(self, data_type: str) -> Kind:
        if data_type in _BOOLEAN_TYPES:
            return Kind.BOOLEAN
        name = type_name(data_type)
        if name == "bit":
            return Kind.INTEGER
        if name in _SPATIAL_TYPES:
            return Kind.OTHER
        return column_kind(data_type)

    def bind(self, kind: Kind, data_type: str, value: Any) -> Any:
        if kind is Kind.UUID:
            return str(value)
        if kind is Kind.FLOAT and type_name(data_type) == "float":
            try:
                return _FLOAT32.unpack(_FLOAT32.pack(value))[0]
            except OverflowError:
                raise Unconvertible("a number within single precision") from None
        return value

    def compared(
        self, column: ColumnElement[Any], kind: Kind, data_type: str
    ) -> ColumnElement[Any]:
        if kind in (Kind.TEXT, Kind.OTHER):
            return _as_bytes(column)
        if kind is Kind.BOOLEAN:
            return column != 0
        return column

    def any_of(
        self, column: ColumnElement[Any], kind: Kind, data_type: str, values: Sequence[Any]
    ) -> ColumnElement[bool]:
        exact = super().any_of(column, kind, data_type, values)
        if kind is not Kind.TEXT or not all(value.isascii() for value in values):
            return exact
        # The column's own (collation-aware) equality is a superset of the exact one that an
        # index can serve; ASCII values convert to any character set, so it cannot fail.
        plain = column == literal(values[0]) if len(values) == 1 else column.in_(values)
        return and_(plain, exact)

    def like(
        self, column: ColumnElement[Any], kind: Kind, data_type: str, pattern: str
    ) -> ColumnElement[bool]:
        if kind is Kind.BOOLEAN:  # NULL stays NULL, as CAST keeps it on the other engines
            column = case((column != 0, "true"), (column == 0, "false"))
        target = _as_utf8(column).collate("utf8mb4_bin")
        return target.like(pattern, escape=LIKE_ESCAPE)


RULES = MySqlRules()


@cache
def _dialect() -> MySQLDialect:
    return MySQLDialect(paramstyle="format")


def to_mysql(statement: ClauseElement) -> tuple[str, tuple[Any, ...]]:
    """SQL text with ``%s`` placeholders and the positional values, as aiomysql takes them
    (always a tuple, so that the driver turns SQLAlchemy's ``%%`` back into ``%``)."""
    compiled = typing_cast(
        SQLCompiler,
        statement.compile(dialect=_dialect(), compile_kwargs={"render_postcompile": True}),
    )
    return compiled.string, tuple(compiled.params[name] for name in compiled.positiontup or ())


def _output(
    column: ColumnElement[Any], data_type: str
) -> tuple[ColumnElement[Any], Callable[[Any], Any] | None]:
    """What to select for a column, and the function its non-null values go through."""
    name = type_name(data_type)
    if data_type in _BOOLEAN_TYPES:
        return column != 0, bool
    if name == "bit":
        return column + 0, None
    if name == "float":
        return column + literal(0.0), _float32
    if name == "json":
        return column, msgspec.Raw
    if name in _SPATIAL_TYPES:
        return func.ST_AsText(column), None
    return column, None


@dataclass(frozen=True, slots=True)
class _Statement:
    result_key: str
    sql: str
    params: tuple[Any, ...]
    row: Callable[..., Any]


_QUERY_ERRORS = (pymysql.err.MySQLError, OSError, TimeoutError, asyncio.IncompleteReadError)


class MySqlReader(DatasourceReader):
    """Reads MySQL and MariaDB datasources. Holds no connection between calls."""

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

    async def _connect(self, endpoint: Endpoint, timeout: float) -> aiomysql.Connection:
        context, required = tls_settings(endpoint)
        connection = _Connection(
            host=endpoint.host,
            port=endpoint.port,
            user=endpoint.user_name,
            password=_wire_password(endpoint.password),
            db=endpoint.database_name or None,
            charset="utf8mb4",
            conv=_DECODERS,
            connect_timeout=timeout,
            autocommit=True,
            ssl=context,
            init_command=_SESSION_SQL,
            program_name="fetcher",
            local_infile=False,
        )
        connection.tls_required = required
        try:
            async with asyncio.timeout(timeout):
                await connection._connect()
        except Exception as error:
            connection.close()
            raise DatasourceUnavailable("failed to connect to datasource") from error
        except BaseException:
            connection.close()
            raise
        return connection

    @staticmethod
    async def _close(connection: aiomysql.Connection) -> None:
        try:
            async with asyncio.timeout(5):
                await connection.ensure_closed()
        except Exception:
            connection.close()
        except BaseException:
            connection.close()
            raise

    async def test(self, endpoint: Endpoint, timeout: float) -> None:
        try:
            async with asyncio.timeout(timeout):
                connection = await self._connect(endpoint, timeout)
                try:
                    async with connection.cursor() as cursor:
                        await cursor.execute("SELECT 1")
                        await cursor.fetchall()
                finally:
                    await self._close(connection)
        except FetcherError:
            raise
        except Exception as error:
            raise DatasourceUnavailable("failed to connect to datasource") from error

    async def discover(self, endpoint: Endpoint, scope: Sequence[str]) -> Schema:
        """Base tables of the connected database; ``scope`` is ignored (reference §3.8)."""
        try:
            async with asyncio.timeout(self._discover_timeout):
                connection = await self._connect(endpoint, self._connect_timeout)
                try:
                    async with connection.cursor() as cursor:
                        await cursor.execute(_DISCOVER_SQL)
                        records = await cursor.fetchall()
                        checks: Sequence[tuple[str, str]] = ()
                        if "mariadb" in connection.get_server_info().lower():
                            await cursor.execute(_MARIADB_JSON_SQL)
                            checks = await cursor.fetchall()
                finally:
                    await self._close(connection)
        except FetcherError:
            raise
        except Exception as error:
            raise DatasourceError(
                "failed to discover datasource schema", stage="discover"
            ) from error
        json_checks = {(table_name, clause) for table_name, clause in checks}
        columns: dict[str, list[Column]] = {}
        for database, table_name, column_name, data_type, column_type in records:
            if database in SYSTEM_SCHEMAS or table_name in SYSTEM_SCHEMAS:
                continue
            found = columns.setdefault(table_name, [])
            if column_name is None:
                continue
            kind = data_type.lower()
            if kind in ("enum", "set"):
                shown = kind
            elif kind == "json" or (
                kind == "longtext" and (table_name, _json_check(column_name)) in json_checks
            ):
                shown = "json"
            else:
                shown = column_type.lower()
            found.append(Column(name=column_name, data_type=shown))
        return Schema(
            tables={
                name: Table(schema=None, name=name, columns=tuple(table_columns))
                for name, table_columns in columns.items()
            }
        )

    def _statement(self, endpoint: Endpoint, read: TableRead) -> _Statement | None:
        chosen = {c.name: c for c in read.columns}
        names = sorted(chosen)
        if not names:
            return None
        wanted = set(names) | set(read.filters)
        source = table(read.table.name, *(sql_column(n) for n in sorted(wanted)))
        outputs = []
        converters: dict[int, Callable[[Any], Any]] = {}
        for index, name in enumerate(names):
            expression, convert = _output(source.c[name], chosen[name].data_type)
            outputs.append(expression.label(name))
            if convert is not None:
                converters[index] = convert
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
        sql, params = to_mysql(query)
        return _Statement(read.result_key, sql, params, row_factory(names, converters))

    def extract(self, endpoint: Endpoint, reads: Sequence[TableRead]) -> AsyncIterator[RowChunk]:
        """Builds every statement now (a filter value that does not convert raises
        ``InvalidRequest`` here, before any I/O), then streams them."""
        statements = [s for s in (self._statement(endpoint, r) for r in reads) if s is not None]
        return self._run(endpoint, statements)

    async def _run(
        self, endpoint: Endpoint, statements: list[_Statement]
    ) -> AsyncGenerator[RowChunk, None]:
        if not statements:
            return
        connection = await self._connect(endpoint, self._connect_timeout)
        finished = False
        try:
            try:
                async with asyncio.timeout(self._query_timeout):
                    async with connection.cursor() as cursor:
                        for sql in _BEGIN_SQL:
                            await cursor.execute(sql)
            except _QUERY_ERRORS as error:
                raise DatasourceQueryFailed() from error
            for statement in statements:
                async with aclosing(self._stream(connection, statement)) as chunks:
                    async for chunk in chunks:
                        yield chunk
            finished = True
        finally:
            if finished:
                await self._close(connection)
            else:
                # An unbuffered result would have to be read to its end before QUIT.
                connection.close()

    async def _stream(
        self, connection: aiomysql.Connection, statement: _Statement
    ) -> AsyncGenerator[RowChunk, None]:
        encode = self._encoder.encode
        row = statement.row
        size = self._chunk_rows
        try:
            cursor = await connection.cursor(aiomysql.SSCursor)
            async with asyncio.timeout(self._query_timeout):
                await cursor.execute(statement.sql, statement.params)
            while True:
                # The cyclic GC is paused while a chunk is fetched and encoded (tens of
                # thousands of short-lived objects), never while the consumer holds control.
                paused = gc.isenabled()
                gc.disable()
                try:
                    async with asyncio.timeout(self._query_timeout):
                        records = await cursor.fetchmany(size)
                    count = len(records)
                    data = encode(list(starmap(row, records)))[1:-1] if count else b""
                    del records
                finally:
                    if paused:
                        gc.enable()
                if count:
                    yield RowChunk(result_key=statement.result_key, data=data, rows=count)
                if count < size:
                    break
            await cursor.close()
        except _QUERY_ERRORS as error:
            raise DatasourceQueryFailed() from error
        except (ValueError, TypeError) as error:
            raise DatasourceQueryFailed("failed to read datasource rows") from error


def _json_check(column_name: str) -> str:
    return "json_valid(`" + column_name.replace("`", "``") + "`)"
