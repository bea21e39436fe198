"""SQL Server datasource reader through aioodbc: connection test, discovery, streamed extraction.

Connection: an ODBC connection string whose every value is brace-quoted (``{...}``, a ``}`` in a
value doubled), so no password or name can add or change an attribute (FreeTDS cannot carry a
``}``: such values are refused with it). The driver is
configurable: ``FreeTDS`` by default, Microsoft's ``ODBC Driver 18 for SQL Server`` when it is
installed. SSL modes
(reference §3.3, with the meaning of ``false`` fixed): none, ``disable`` and ``false`` mean no
encryption; ``true`` encrypts without verifying the certificate (``TrustServerCertificate``);
``strict`` is TDS 8 strict encryption (FreeTDS 1.4 or later, Microsoft's driver 18).

Statements are built with SQLAlchemy Core's ``mssql`` dialect (bracket-quoted identifiers, ``?``
parameters bound by pyodbc) and read with ``fetchmany`` in chunks of ``chunk_rows``. Discovery reads
``INFORMATION_SCHEMA`` for base tables in the scope (default ``dbo``); tables are keyed ``table`` in
``dbo`` and ``schema.table`` elsewhere; ``sys``, ``INFORMATION_SCHEMA`` and ``db_*`` schemas and
``db_*`` tables are left out.

Row encoding (``adapters.datasources.encoding`` for the rest):

=======================================  ==========================================================
SQL Server type                          JSON value
=======================================  ==========================================================
tinyint, smallint, int, bigint           number
decimal, numeric, money, smallmoney      string with the exact digits (``"12.5000"``)
float / real                             number (``real`` as its shortest single-precision text)
bit                                      ``true`` / ``false``
char, varchar, nchar, nvarchar, (n)text  string
date / time                              ``"YYYY-MM-DD"`` / ``"HH:MM:SS[.ffffff]"``
datetime, datetime2, smalldatetime       RFC 3339, read as UTC: ``"2024-01-02T03:04:05Z"``
datetimeoffset                           RFC 3339 in UTC (converted on the server)
uniqueidentifier                         canonical lower-case string
binary, varbinary, image, rowversion     standard base64 string
xml, hierarchyid, sql_variant            their text form
geography, geometry                      well-known text (``POINT (1 2)``)
=======================================  ==========================================================

Filters: ``adapters.datasources.sql_filters`` with ``SqlServerRules``. Text compares exactly, as on
every engine, whatever the column's collation (usually case-insensitive on SQL Server): under
``Latin1_General_100_BIN2``, with ``NCHAR(0)`` appended to both sides so that SQL Server's
trailing-space padding cannot equate ``'a'`` and ``'a '``, ordered by UTF-16 code unit; ``like``
the same way, with ``[`` a plain character. ``bit`` is boolean, ``tinyint`` 0-255,
``datetimeoffset`` compared in UTC; see ``SqlServerRules`` for the details and the limits.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from functools import cache
from typing import Any
from typing import cast as typing_cast

from sqlalchemy import and_, case, cast, func, literal, literal_column, select, table
from sqlalchemy import column as sql_column
from sqlalchemy.dialects.mssql import CHAR, DATETIME2, NVARCHAR
from sqlalchemy.dialects.mssql.base import MSTypeCompiler
from sqlalchemy.dialects.mssql.pyodbc import MSDialect_pyodbc
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import ClauseElement, ColumnElement, quoted_name

from adapters.datasources.encoding import Converter, RowEncoder, float32, paused_gc, utc
from adapters.datasources.sql_filters import (
    LIKE_ESCAPE,
    FilterRules,
    Kind,
    column_kind,
    filter_clauses,
)
from adapters.datasources.sql_values import type_name
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

DEFAULT_DRIVER = "FreeTDS"
MICROSOFT_DRIVER = "ODBC Driver 18 for SQL Server"
DEFAULT_SCHEMA_NAME = DEFAULT_SCHEMA[DatabaseType.SQL_SERVER]
SYSTEM_SCHEMAS = frozenset({"sys", "information_schema"})

_UTC_TYPES = frozenset({"datetime", "datetime2", "smalldatetime", "datetimeoffset"})
_TEXT_OUTPUT = {"xml": None, "hierarchyid": None, "sql_variant": 4000}
_SPATIAL = frozenset({"geography", "geometry"})


def odbc_value(value: str) -> str:
    """An ODBC connection-string value, brace-quoted so that ``;``, ``=``, ``{`` or ``}`` in it
    stay part of the value."""
    return "{" + value.replace("}", "}}") + "}"


def is_freetds(driver: str) -> bool:
    return "freetds" in driver.lower() or "libtdsodbc" in driver.lower()


def encryption_attributes(mode: str, driver: str) -> list[tuple[str, str]]:
    """Connection attributes for an SSL mode (reference §3.3; ``false`` means no encryption)."""
    freetds = is_freetds(driver)
    if mode in ("", "disable", "false"):
        return [("Encryption", "off")] if freetds else [("Encrypt", "no")]
    if mode == "true":
        if freetds:  # FreeTDS verifies nothing unless given a CA file
            return [("Encryption", "require")]
        return [("Encrypt", "yes"), ("TrustServerCertificate", "yes")]
    if mode == "strict":
        return [("Encryption", "strict")] if freetds else [("Encrypt", "strict")]
    raise InvalidSslMode(mode)


class UnsupportedCredentials(InvalidRequest):
    def __init__(self) -> None:
        super().__init__(
            "the FreeTDS ODBC driver cannot pass a '}' in the user name, password or database "
            f"name; install Microsoft's {MICROSOFT_DRIVER} to use them"
        )


def connection_string(endpoint: Endpoint, driver: str = DEFAULT_DRIVER) -> str:
    """The ODBC connection string; holds the password, so it is never logged.

    FreeTDS (1.3) ends a braced value at the first ``}`` and does not undouble ``}}``: a value
    holding ``}`` would reach the server altered, or end early and let the rest be read as other
    attributes, so such values are refused with that driver."""
    attributes: list[tuple[str, str]] = [("DRIVER", driver)]
    if is_freetds(driver):
        if any("}" in v for v in (endpoint.user_name, endpoint.password, endpoint.database_name)):
            raise UnsupportedCredentials()
        attributes += [
            ("SERVER", endpoint.host),
            ("PORT", str(endpoint.port)),
            ("ClientCharset", "UTF-8"),
        ]
    else:
        attributes += [("SERVER", f"tcp:{endpoint.host},{endpoint.port}")]
    attributes += [
        ("DATABASE", endpoint.database_name),
        ("UID", endpoint.user_name),
        ("PWD", endpoint.password),
        ("APP", "fetcher"),
    ]
    attributes += encryption_attributes(endpoint.ssl_mode, driver)
    return ";".join(f"{key}={odbc_value(value)}" for key, value in attributes)


def escape_brackets(pattern: str) -> str:
    """A ``like`` pattern with SQL Server's ``[...]`` character classes made plain characters
    (``\\[``), so the pattern means what it means on the other engines."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            out.append(pattern[i : i + 2])
            i += 2
            continue
        out.append("\\[" if ch == "[" else ch)
        i += 1
    return "".join(out)


class _TypeCompiler(MSTypeCompiler):
    def visit_string(self, type_: Any, **kw: Any) -> str:
        # Text casts (filters on non-text columns) keep Unicode: NVARCHAR(max), not VARCHAR(30).
        return self._extend("NVARCHAR", type_, length=type_.length or "max")


class _Dialect(MSDialect_pyodbc):
    type_compiler_cls = _TypeCompiler


@cache
def _dialect() -> _Dialect:
    return _Dialect(paramstyle="qmark")


def to_pyodbc(statement: ClauseElement) -> tuple[str, tuple[Any, ...]]:
    """SQL text with ``?`` placeholders and the values in their order, as pyodbc takes them."""
    compiled = typing_cast(
        SQLCompiler,
        statement.compile(dialect=_dialect(), compile_kwargs={"render_postcompile": True}),
    )
    return compiled.string, tuple(compiled.params[n] for n in compiled.positiontup or ())


class _Method(ColumnElement[Any]):
    """``column.Method()``, SQL Server's call syntax for CLR types."""

    inherit_cache = True

    def __init__(self, column: ColumnElement[Any], method: str) -> None:
        self.column = column
        self.method = method


@compiles(_Method, "mssql")
def _compile_method(element: _Method, compiler: SQLCompiler, **kw: Any) -> str:
    return f"{compiler.process(element.column, **kw)}.{element.method}()"


def _name(value: str) -> quoted_name:
    return quoted_name(value, quote=True)


def discovery_statement(schemas: Sequence[str]) -> tuple[str, tuple[Any, ...]]:
    tables = table(
        "TABLES", *(sql_column(n) for n in ("TABLE_SCHEMA", "TABLE_NAME", "TABLE_TYPE")),
        schema="INFORMATION_SCHEMA",
    )  # fmt: skip
    columns = table(
        "COLUMNS",
        *(sql_column(n) for n in ("TABLE_SCHEMA", "TABLE_NAME", "COLUMN_NAME", "DATA_TYPE",
                                  "ORDINAL_POSITION")),
        schema="INFORMATION_SCHEMA",
    )  # fmt: skip
    t, c = tables.c, columns.c
    query = (
        select(t.TABLE_SCHEMA, t.TABLE_NAME, c.COLUMN_NAME, c.DATA_TYPE)
        .select_from(
            tables.outerjoin(
                columns, and_(c.TABLE_SCHEMA == t.TABLE_SCHEMA, c.TABLE_NAME == t.TABLE_NAME)
            )
        )
        .where(t.TABLE_TYPE == "BASE TABLE", t.TABLE_SCHEMA.in_(list(schemas)))
        .order_by(t.TABLE_SCHEMA, t.TABLE_NAME, c.ORDINAL_POSITION)
    )
    return to_pyodbc(query)


def is_system(schema: str, name: str) -> bool:
    schema, name = schema.lower(), name.lower()
    return schema in SYSTEM_SCHEMAS or schema.startswith("db_") or name.startswith("db_")


def table_key(schema: str, name: str) -> str:
    return name if schema == DEFAULT_SCHEMA_NAME else f"{schema}.{name}"


def _output(column: ColumnElement[Any], data_type: str) -> ColumnElement[Any]:
    if data_type == "uniqueidentifier":
        return func.lower(cast(column, CHAR(36)))
    if data_type == "datetimeoffset":
        return cast(func.switchoffset(column, literal_column("'+00:00'")), DATETIME2)
    if data_type in _TEXT_OUTPUT:
        return cast(column, NVARCHAR(_TEXT_OUTPUT[data_type]))
    if data_type in _SPATIAL:
        return _Method(column, "STAsText")
    return column


def _converter(data_type: str) -> Converter | None:
    if data_type in _UTC_TYPES:
        return utc
    if data_type == "real":
        return float32
    return None


# Every text comparison runs under this binary collation: case- and accent-sensitive, each
# character its UTF-16 code unit(s), whatever the column's collation.
BINARY_COLLATION = "Latin1_General_100_BIN2"
# Appended to both sides of every text comparison, so that SQL Server's trailing-space padding
# cannot make "a" equal "a " (see SqlServerRules).
_SENTINEL = literal_column("NCHAR(0)", NVARCHAR())
_TRUE, _FALSE = literal_column("'true'"), literal_column("'false'")
_KINDS = {
    "bit": Kind.BOOLEAN,
    "money": Kind.NUMERIC,
    "smallmoney": Kind.NUMERIC,
    # Values are bound as naive UTC date-times; SQL Server compares a datetimeoffset with them
    # by its UTC instant (a datetime2 converts to datetimeoffset at +00:00).
    "datetimeoffset": Kind.TIMESTAMP,
    "timestamp": Kind.OTHER,  # rowversion, not a date-time
    "rowversion": Kind.OTHER,
}


def _as_nvarchar(expression: ColumnElement[Any]) -> ColumnElement[Any]:
    return cast(expression, NVARCHAR())


def exact_text(expression: ColumnElement[Any]) -> ColumnElement[Any]:
    """A text expression as it is compared: ``NVARCHAR(max)`` (no truncation when the sentinel is
    appended, any code page converted to Unicode), the sentinel appended, binary collation."""
    return (_as_nvarchar(expression) + _SENTINEL).self_group().collate(BINARY_COLLATION)


def _text_form(column: ColumnElement[Any], kind: Kind, data_type: str) -> ColumnElement[Any]:
    """What a column is compared or matched by as text: itself, except where the result shows
    another text (booleans ``true``/``false``, UUIDs lower-case, spatial values as WKT)."""
    name = type_name(data_type)
    if kind is Kind.BOOLEAN:
        return case((column == 1, _TRUE), (column == 0, _FALSE))
    if name in _SPATIAL or name == "uniqueidentifier":
        return _output(column, name)
    return column


class SqlServerRules(FilterRules):
    """The operators' common meaning on SQL Server, whatever the columns' collations.

    Text (and the text of ``OTHER`` columns) compares exactly: both sides as ``NVARCHAR(max)``
    with ``NCHAR(0)`` appended, the column side under ``Latin1_General_100_BIN2``. The binary
    collation makes comparisons case- and accent-sensitive. The sentinel defeats the padding
    SQL Server applies to ``=``, ``<``... (there ``'a' = 'a '`` is true and ``'a'`` sorts after
    ``'a' + CHAR(9)``): two strings that both end with ``NCHAR(0)`` are padding-equal only when
    they are equal, and a string sorts before every longer string that starts with it, since
    nothing sorts below ``NCHAR(0)``. A DATALENGTH check would fix equality but not ordering,
    and would need one check per value of an ``IN`` list. ``NVARCHAR(max)`` keeps the
    concatenation from being cut at 4,000 characters and converts any code page to Unicode.

    Limits: text that itself holds ``NCHAR(0)`` may order wrongly; order is by UTF-16 code unit,
    which is code point order except that characters above U+FFFF sort before U+E000-U+FFFF;
    ``CHAR(n)``/``NCHAR(n)`` values compare as stored, padded (as the result shows them); no
    index serves these comparisons.

    ``like`` matches the same way (``LIKE`` alone ignores trailing spaces of ``VARCHAR``
    values), ``[`` in a pattern is a plain character (``\\[``), and ``_`` matches one UTF-16
    code unit (a character above U+FFFF needs two). Other columns compare and match by the text
    the result shows where it differs from ``CAST``'s: ``bit`` as ``true``/``false``, UUIDs
    lower-case, spatial values as WKT. ``bit`` is boolean, ``tinyint`` 0-255, ``money``
    numeric, ``datetimeoffset`` compared in UTC, ``rowversion`` as text, UUIDs bound as text.
    """

    def kind(self, data_type: str) -> Kind:
        return _KINDS.get(type_name(data_type)) or column_kind(data_type)

    def convert(self, kind: Kind, data_type: str, value: Any) -> Any:
        if type_name(data_type) == "tinyint":
            data_type = "tinyint unsigned"
        return super().convert(kind, data_type, value)

    def bind(self, kind: Kind, data_type: str, value: Any) -> Any:
        return str(value) if kind is Kind.UUID else value

    def compared(
        self, column: ColumnElement[Any], kind: Kind, data_type: str
    ) -> ColumnElement[Any]:
        if kind in (Kind.TEXT, Kind.OTHER):
            return exact_text(_text_form(column, kind, data_type))
        return column

    def operand(self, kind: Kind, data_type: str, value: Any) -> ColumnElement[Any]:
        if kind in (Kind.TEXT, Kind.OTHER):
            return _as_nvarchar(literal(value)) + _SENTINEL
        return literal(value)

    def any_of(
        self, column: ColumnElement[Any], kind: Kind, data_type: str, values: Sequence[Any]
    ) -> ColumnElement[bool]:
        target = self.compared(column, kind, data_type)
        operands = [self.operand(kind, data_type, value) for value in values]
        return target == operands[0] if len(operands) == 1 else target.in_(operands)

    def none_of(
        self, column: ColumnElement[Any], kind: Kind, data_type: str, values: Sequence[Any]
    ) -> ColumnElement[bool]:
        target = self.compared(column, kind, data_type)
        operands = [self.operand(kind, data_type, value) for value in values]
        return target != operands[0] if len(operands) == 1 else target.not_in(operands)

    def like(
        self, column: ColumnElement[Any], kind: Kind, data_type: str, pattern: str
    ) -> ColumnElement[bool]:
        # The pattern is not widened to NVARCHAR(max): LIKE takes patterns of up to 8000 bytes.
        target = exact_text(_text_form(column, kind, data_type))
        return target.like(literal(escape_brackets(pattern)) + _SENTINEL, escape=LIKE_ESCAPE)


RULES = SqlServerRules()


@dataclass(frozen=True, slots=True)
class _Statement:
    result_key: str
    sql: str
    params: tuple[Any, ...]
    encoder: RowEncoder


def select_statement(endpoint: Endpoint, read: TableRead) -> _Statement | None:
    """The statement reading one table, or ``None`` when no column is asked for."""
    chosen = {c.name: c for c in read.columns}
    names = sorted(chosen)
    if not names:
        return None
    wanted = sorted(set(names) | set(read.filters))
    source = table(
        _name(read.table.name),
        *(sql_column(_name(n)) for n in wanted),
        schema=_name(read.table.schema) if read.table.schema else None,
    )
    outputs = [_output(source.c[n], chosen[n].data_type) for n in names]
    clauses: list[ColumnElement[bool]] = []
    for field, condition in read.filters.items():
        column = read.table.column(field)
        where = f"'{read.result_key}.{field}' of database '{endpoint.database_name}'"
        if column is None:
            raise InvalidRequest(f"filter on {where}: the field is not a column of the table")
        clauses.extend(
            filter_clauses(source.c[field], column.data_type, condition, where=where, rules=RULES)
        )
    query = select(*outputs).select_from(source)
    if clauses:
        query = query.where(and_(*clauses))
    sql, params = to_pyodbc(query)
    converters = {
        i: f for i, n in enumerate(names) if (f := _converter(chosen[n].data_type)) is not None
    }
    return _Statement(read.result_key, sql, params, RowEncoder(names, converters))


class SqlServerReader(DatasourceReader):
    """Reads SQL Server datasources. Holds no connection between calls.

    ``driver`` names the ODBC driver; ``None`` picks Microsoft's driver 18 when it is installed,
    else FreeTDS.
    """

    def __init__(
        self,
        *,
        driver: str | None = None,
        connect_timeout: float = 10.0,
        discover_timeout: float = 30.0,
        query_timeout: float = 120.0,
        chunk_rows: int = 10_000,
    ) -> None:
        self._driver = driver
        self._connect_timeout = connect_timeout
        self._discover_timeout = discover_timeout
        self._query_timeout = query_timeout
        self._chunk_rows = chunk_rows

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
        try:
            async with asyncio.timeout(timeout):
                connection = await self._connect(endpoint, timeout)
                try:
                    cursor = await connection.execute("SELECT 1")
                    await cursor.fetchone()
                    await cursor.close()
                finally:
                    await self._close(connection)
        except FetcherError:
            raise
        except Exception as error:
            raise DatasourceUnavailable("failed to connect to datasource") from error

    async def discover(self, endpoint: Endpoint, scope: Sequence[str]) -> Schema:
        schemas = list(scope) or [endpoint.schema or DEFAULT_SCHEMA_NAME]
        sql, params = discovery_statement(schemas)
        try:
            async with asyncio.timeout(self._discover_timeout):
                connection = await self._connect(endpoint, self._connect_timeout)
                try:
                    cursor = await connection.execute(sql, *params)
                    records = await cursor.fetchall()
                    await cursor.close()
                finally:
                    await self._close(connection)
        except FetcherError:
            raise
        except Exception as error:
            raise DatasourceError(
                "failed to discover datasource schema", stage="discover"
            ) from error
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
        self, endpoint: Endpoint, statements: list[_Statement]
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
        self, connection: Any, statement: _Statement
    ) -> AsyncGenerator[RowChunk, None]:
        size = self._chunk_rows
        try:
            cursor = await connection.cursor()
        except Exception as error:
            raise DatasourceQueryFailed() from error
        try:
            await cursor.execute(statement.sql, *statement.params)
            while True:
                rows = await cursor.fetchmany(size)
                with paused_gc():
                    data = statement.encoder.encode(rows)
                count = len(rows)
                del rows
                if count:
                    yield RowChunk(result_key=statement.result_key, data=data, rows=count)
                if count < size:
                    return
        except FetcherError:
            raise
        except Exception as error:
            raise DatasourceQueryFailed() from error
        finally:
            try:
                await cursor.close()
            except Exception:
                pass
