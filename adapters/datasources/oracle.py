"""Oracle datasource reader through python-oracledb in thin mode (asyncio): connection test,
discovery, streamed extraction.

Connection: host, port and ``metadata.serviceName`` (required; ``databaseName`` is not used to
connect), credentials as driver arguments. SSL modes (the reference validates but ignores them):
none, ``disable`` and ``false`` connect over plain TCP; ``true``, ``enable`` and ``verify`` over
TLS (``tcps``) verifying the server against ``ssl.ca`` when given, else the system store;
``skip-verify`` over TLS without verification.

Owners are the schemas. Discovery reads ``ALL_TABLES``/``ALL_TAB_COLUMNS`` for the owners in the
scope (upper-cased) plus the connected user; tables are keyed ``TABLE`` for the user's own and
``OWNER.TABLE`` otherwise, upper-cased (reference §4.4), and so are column names; the physical
names are kept for the statements, so quoted mixed-case names work. System objects are removed
(reference §3.8). Statements are built with SQLAlchemy Core's ``oracle`` dialect (quoted
identifiers, named ``:pN`` parameters) and read with ``fetchmany`` in chunks of ``chunk_rows``.

Row encoding (``adapters.datasources.encoding`` for the rest):

====================================  =============================================================
Oracle type                           JSON value
====================================  =============================================================
NUMBER(p, 0), INTEGER                 number (exact digits)
NUMBER, NUMBER(p, s>0), FLOAT         string with the exact digits (``"12.5"``: Oracle keeps no
                                      trailing zeros)
BINARY_FLOAT, BINARY_DOUBLE           number (BINARY_FLOAT as its shortest single-precision text);
                                      NaN/±Infinity as ``"NaN"``/``"Infinity"``/``"-Infinity"``
VARCHAR2, NVARCHAR2, CHAR, NCHAR,     string (CHAR blank-padded as stored)
CLOB, NCLOB, LONG, ROWID
DATE, TIMESTAMP                       RFC 3339, read as UTC: ``"2024-01-02T03:04:05Z"``
TIMESTAMP WITH [LOCAL] TIME ZONE      RFC 3339 in UTC (converted on the server)
INTERVAL DAY TO SECOND                ISO 8601 duration (``"P1DT2H"``)
INTERVAL YEAR TO MONTH                ISO 8601 duration (``"P1Y2M"``)
RAW, BLOB, LONG RAW                   standard base64 string
BOOLEAN (23ai), JSON (21c)            ``true``/``false``; embedded JSON
====================================  =============================================================

Filters: ``adapters.datasources.sql_filters`` with ``OracleRules``. Text compares exactly, as on
every engine: a bound string against ``VARCHAR2`` compares without blank padding, and binary,
since every extraction session sets ``NLS_COMP`` and ``NLS_SORT`` to ``BINARY`` first (they are
the defaults, but an instance parameter or a logon trigger may make them linguistic). An empty
string is refused as a value (Oracle stores it as NULL). ``DATE`` carries a time of day, so it
is filtered as a timestamp; time-zone columns compare in UTC; ``CLOB`` comparisons use its first
4000 characters; see ``OracleRules`` for the details and the limits.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import ssl
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from decimal import Decimal
from functools import cache
from typing import Any
from typing import cast as typing_cast

import oracledb
from sqlalchemy import String, and_, cast, func, select, table
from sqlalchemy import column as sql_column
from sqlalchemy.dialects.oracle.oracledb import OracleDialect_oracledb
from sqlalchemy.sql import visitors
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import BindParameter, ClauseElement, ColumnElement, quoted_name

from adapters.datasources.encoding import (
    Converter,
    RowEncoder,
    finite_float,
    float32,
    iso_duration,
    paused_gc,
)
from adapters.datasources.encoding import utc as utc_datetime
from adapters.datasources.sql_filters import (
    LIKE_ESCAPE,
    FilterRules,
    Kind,
    column_kind,
    filter_clauses,
)
from adapters.datasources.sql_values import Unconvertible
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

SERVICE_NAME_REQUIRED = "serviceName is required in metadata for Oracle connection"
SYSTEM_PREFIXES = ("LOGMNR", "REDO_", "MVIEW$", "AQ$", "DEF$", "REPCAT$", "SQLPLUS_")
SYSTEM_NAMES = frozenset(
    {
        "REDO_LOG", "REDO_DB", "PLAN_TABLE", "SYS", "SYSTEM", "OUTLN", "XDB", "MDSYS", "CTXSYS",
        "DBSNMP", "WMSYS", "EXFSYS", "ORDSYS", "ORDDATA", "ORDPLUGINS", "SI_INFORMTN_SCHEMA",
        "APEX_PUBLIC_USER", "APEX_040000", "APEX_030200", "FLOWS_FILES", "ANONYMOUS",
    }
)  # fmt: skip
_TZ_TYPES = ("timestamp with time zone", "timestamp with local time zone")
_LOB_TEXT = frozenset({"clob", "nclob"})
_PARAMS_RE = re.compile(r"\([^)]*\)")
# Filters compare text binary (OracleRules), whatever the instance or a logon trigger set.
SESSION_SQL = "ALTER SESSION SET NLS_COMP = BINARY NLS_SORT = BINARY"


@dataclass(frozen=True, slots=True)
class OracleColumn(Column):
    """A discovered column: ``name`` upper-cased (what requests and results use), ``physical``
    as the dictionary spells it (what statements use)."""

    physical: str = ""


class MissingServiceName(InvalidRequest):
    def __init__(self) -> None:
        super().__init__(SERVICE_NAME_REQUIRED)


def service_name(endpoint: Endpoint) -> str:
    value = endpoint.options.get("serviceName")
    if not isinstance(value, str) or not value.strip():
        raise MissingServiceName()
    return value.strip()


def _tls_context(endpoint: Endpoint, verify: bool) -> ssl.SSLContext:
    if not verify:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    else:
        context = ssl.create_default_context(cadata=endpoint.ssl_ca or None)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


def connect_arguments(endpoint: Endpoint, timeout: float) -> dict[str, Any]:
    """``oracledb.connect_async`` keyword arguments; the password is one of them."""
    arguments: dict[str, Any] = {
        "user": endpoint.user_name,
        "password": endpoint.password,
        "host": endpoint.host,
        "port": endpoint.port,
        "service_name": service_name(endpoint),
        "tcp_connect_timeout": timeout,
        "retry_count": 0,
        "program": "fetcher",
    }
    mode = endpoint.ssl_mode
    if mode in ("", "disable", "false"):
        arguments["protocol"] = "tcp"
    elif mode in ("true", "enable", "verify", "skip-verify"):
        verify = mode != "skip-verify"
        arguments["protocol"] = "tcps"
        arguments["ssl_context"] = _tls_context(endpoint, verify)
        arguments["ssl_server_dn_match"] = verify
    else:
        raise InvalidSslMode(mode)
    return arguments


def is_system(name: str) -> bool:
    name = name.upper()
    return "$" in name or name.startswith(SYSTEM_PREFIXES) or name in SYSTEM_NAMES


def table_key(owner: str, name: str, user: str) -> str:
    return name.upper() if owner == user else f"{owner}.{name}".upper()


def like_pattern(pattern: str) -> str:
    """A ``like`` pattern Oracle accepts with ``ESCAPE '\\'``: an escape only before ``%``,
    ``_`` or ``\\`` (elsewhere it stands for the next character). A pattern ending with a lone
    escape is left as it is: the filter builder refuses it, as on every engine."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            following = pattern[i + 1]
            out.append("\\" + following if following in "%_\\" else following)
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


@cache
def _dialect() -> OracleDialect_oracledb:
    return OracleDialect_oracledb()


def to_oracledb(statement: ClauseElement) -> tuple[str, dict[str, Any]]:
    """SQL text with ``:p1``, ``:p2``... placeholders and the values by name, as oracledb takes
    them. Parameters are renamed so that no column name (quotes, spaces, length) reaches them."""
    counter = itertools.count(1)

    def rename(bind: BindParameter[Any]) -> None:
        bind.key = f"p{next(counter)}"

    renamed = visitors.cloned_traverse(statement, {}, {"bindparam": rename})
    compiled = typing_cast(
        SQLCompiler,
        renamed.compile(dialect=_dialect(), compile_kwargs={"render_postcompile": True}),
    )
    return compiled.string, dict(compiled.params)


def _name(value: str) -> quoted_name:
    return quoted_name(value, quote=True)


def discovery_statement(owners: Sequence[str]) -> tuple[str, dict[str, Any]]:
    tables = table(_name("ALL_TABLES"), sql_column(_name("OWNER")), sql_column(_name("TABLE_NAME")))
    columns = table(
        _name("ALL_TAB_COLUMNS"),
        *(sql_column(_name(n)) for n in ("OWNER", "TABLE_NAME", "COLUMN_NAME", "DATA_TYPE",
                                         "DATA_PRECISION", "DATA_SCALE", "COLUMN_ID")),
    )  # fmt: skip
    t, c = tables.c, columns.c
    query = (
        select(t.OWNER, t.TABLE_NAME, c.COLUMN_NAME, c.DATA_TYPE, c.DATA_PRECISION, c.DATA_SCALE)
        .select_from(tables.join(columns, and_(c.OWNER == t.OWNER, c.TABLE_NAME == t.TABLE_NAME)))
        .where(t.OWNER.in_(list(owners)))
        .order_by(t.OWNER, t.TABLE_NAME, c.COLUMN_ID)
    )
    return to_oracledb(query)


def column_type(data_type: str, precision: int | None, scale: int | None) -> str:
    """The type as Oracle writes it, lower-cased: ``number(10,0)``, ``number(*,0)``,
    ``varchar2``, ``timestamp(6) with time zone``..."""
    data_type = data_type.lower()
    if data_type == "number" and (precision is not None or scale is not None):
        digits = "*" if precision is None else str(precision)
        return f"number({digits},{scale or 0})"
    return data_type


def _base_type(data_type: str) -> str:
    return " ".join(_PARAMS_RE.sub("", data_type).split())


def _output(column: ColumnElement[Any], data_type: str) -> ColumnElement[Any]:
    if _base_type(data_type) in _TZ_TYPES:
        return func.sys_extract_utc(column)
    return column


def _interval_ym(value: Any) -> str:
    years, months = value.years, value.months
    sign = "-" if years < 0 or months < 0 else ""
    return f"{sign}P{abs(years)}Y{abs(months)}M"


def _converter(data_type: str) -> Converter | None:
    base = _base_type(data_type)
    if base in ("date", "timestamp", *_TZ_TYPES):
        return utc_datetime
    if base == "binary_float":
        return float32
    if base == "binary_double":
        return finite_float
    if base == "interval year to month":
        return _interval_ym
    if base == "interval day to second":
        return iso_duration
    return None


class OracleRules(FilterRules):
    """The operators' common meaning on Oracle.

    Text compares as Oracle compares ``VARCHAR2`` with a bound string: no blank padding (a bind
    variable is not ``CHAR``, so ``CHAR(n)`` values compare as stored, padded, as the result
    shows them), and binary, because every extraction session sets ``NLS_COMP = BINARY`` and
    ``NLS_SORT = BINARY`` (the defaults, which an instance parameter or a logon trigger may
    change to a linguistic, case-insensitive comparison): byte order of the database character
    set, which for AL32UTF8 is code point order, and UTF-16 code unit order for ``NVARCHAR2``
    under AL16UTF16 (characters above U+FFFF before U+E000-U+FFFF). ``like`` is binary under
    the same settings. Limit: a column declared with a collation of its own (Oracle 12.2 and
    later, ``MAX_STRING_SIZE = EXTENDED`` only) compares by it; adding ``COLLATE BINARY`` is
    not an option, since databases with ``MAX_STRING_SIZE = STANDARD`` refuse it (ORA-43929).

    Oracle stores an empty string as NULL, so a filter value ``""`` compared as text could not
    mean what it means elsewhere (``ne ""`` would match nothing): it is refused.

    ``DATE`` carries a time of day, so it is filtered as a timestamp; time-zone columns compare
    in UTC (``sys_extract_utc``, as the result shows them); ``CLOB``/``NCLOB`` compare their
    first 4,000 characters (``=``/``<`` cannot take a LOB) and ``like`` matches the whole LOB;
    ``BOOLEAN`` (23ai) matches ``like`` as ``true``/``false``; in ``like`` patterns a ``\\``
    before a character other than ``%``, ``_`` or ``\\`` stands for that character
    (``like_pattern``), as on the other engines (Oracle would reject it).
    """

    def kind(self, data_type: str) -> Kind:
        base = _base_type(data_type)
        if base == "date" or base in _TZ_TYPES:
            return Kind.TIMESTAMP
        return column_kind(data_type)

    def bind(self, kind: Kind, data_type: str, value: Any) -> Any:
        if value == "" and kind in (Kind.TEXT, Kind.OTHER):
            raise Unconvertible("a non-empty string (Oracle stores an empty string as NULL)")
        return value

    def compared(
        self, column: ColumnElement[Any], kind: Kind, data_type: str
    ) -> ColumnElement[Any]:
        base = _base_type(data_type)
        if base in _TZ_TYPES:
            return func.sys_extract_utc(column)
        if base in _LOB_TEXT:
            return func.dbms_lob.substr(column, 4000, 1)
        return super().compared(column, kind, data_type)

    def like(
        self, column: ColumnElement[Any], kind: Kind, data_type: str, pattern: str
    ) -> ColumnElement[bool]:
        if kind is Kind.TEXT:
            target = column
        elif kind is Kind.BOOLEAN:
            target = func.lower(cast(column, String))
        else:
            target = cast(self.compared(column, kind, data_type), String)
        return target.like(like_pattern(pattern), escape=LIKE_ESCAPE)


RULES = OracleRules()


def _physical(column: Column) -> str:
    return column.physical if isinstance(column, OracleColumn) and column.physical else column.name


@dataclass(frozen=True, slots=True)
class _Statement:
    result_key: str
    sql: str
    params: dict[str, Any]
    encoder: RowEncoder


def select_statement(endpoint: Endpoint, read: TableRead) -> _Statement | None:
    """The statement reading one table, or ``None`` when no column is asked for."""
    chosen = {c.name: c for c in read.columns}
    names = sorted(chosen)
    if not names:
        return None
    physical = {c.name: _physical(c) for c in (*read.table.columns, *read.columns)}
    wanted = sorted({physical.get(n, n) for n in (*names, *read.filters)})
    source = table(
        _name(read.table.name),
        *(sql_column(_name(n)) for n in wanted),
        schema=_name(read.table.schema) if read.table.schema else None,
    )
    outputs = [_output(source.c[physical[n]], chosen[n].data_type) for n in names]
    clauses: list[ColumnElement[bool]] = []
    for field, condition in read.filters.items():
        column = read.table.column(field)
        where = f"'{read.result_key}.{field}' of database '{endpoint.database_name}'"
        if column is None:
            raise InvalidRequest(f"filter on {where}: the field is not a column of the table")
        clauses.extend(
            filter_clauses(
                source.c[physical[field]], column.data_type, condition, where=where, rules=RULES
            )
        )
    query = select(*outputs).select_from(source)
    if clauses:
        query = query.where(and_(*clauses))
    sql, params = to_oracledb(query)
    converters = {
        i: f for i, n in enumerate(names) if (f := _converter(chosen[n].data_type)) is not None
    }
    return _Statement(read.result_key, sql, params, RowEncoder(names, converters))


def _output_type_handler(cursor: Any, metadata: Any) -> Any:
    """NUMBER with a scale as Decimal (exact digits); integers stay int."""
    if metadata.type_code is oracledb.DB_TYPE_NUMBER and not (
        metadata.scale == 0 and (metadata.precision or 0) > 0
    ):
        return cursor.var(Decimal, arraysize=cursor.arraysize)
    return None


class OracleReader(DatasourceReader):
    """Reads Oracle datasources. Holds no connection between calls."""

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
        connection.outputtypehandler = _output_type_handler
        return connection

    @staticmethod
    async def _close(connection: oracledb.AsyncConnection) -> None:
        try:
            await connection.close()
        except Exception:
            pass

    async def test(self, endpoint: Endpoint, timeout: float) -> None:
        try:
            async with asyncio.timeout(timeout):
                connection = await self._connect(endpoint, timeout)
                try:
                    await connection.ping()
                finally:
                    await self._close(connection)
        except FetcherError:
            raise
        except Exception as error:
            raise DatasourceUnavailable("failed to connect to datasource") from error

    async def discover(self, endpoint: Endpoint, scope: Sequence[str]) -> Schema:
        requested = [s.upper() for s in scope] or (
            [endpoint.schema.upper()] if endpoint.schema else []
        )
        try:
            async with asyncio.timeout(self._discover_timeout):
                connection = await self._connect(endpoint, self._connect_timeout)
                try:
                    with connection.cursor() as cursor:
                        await cursor.execute("SELECT USER FROM DUAL")
                        (user,) = typing_cast(tuple[str], await cursor.fetchone())
                        owners = list(dict.fromkeys([*requested, user]))
                        sql, params = discovery_statement(owners)
                        cursor.arraysize = 1_000
                        await cursor.execute(sql, params)
                        records = await cursor.fetchall()
                finally:
                    await self._close(connection)
        except FetcherError:
            raise
        except Exception as error:
            raise DatasourceError(
                "failed to discover datasource schema", stage="discover"
            ) from error
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
        self, endpoint: Endpoint, statements: list[_Statement]
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
        self, connection: oracledb.AsyncConnection, statement: _Statement
    ) -> AsyncGenerator[RowChunk, None]:
        size = self._chunk_rows
        cursor = connection.cursor()
        try:
            cursor.arraysize = size
            cursor.prefetchrows = size + 1
            await cursor.execute(statement.sql, statement.params, fetch_lobs=False)
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
            cursor.close()
