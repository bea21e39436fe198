"""SQL Server statements, built with SQLAlchemy Core's ``mssql`` dialect: discovery, reads and
filters.

Identifiers are bracket-quoted, values ``?`` parameters bound by pyodbc. Discovery reads
``INFORMATION_SCHEMA`` for base tables in the scope (default ``dbo``); tables are keyed ``table``
in ``dbo`` and ``schema.table`` elsewhere; ``sys``, ``INFORMATION_SCHEMA`` and ``db_*`` schemas
and ``db_*`` tables are left out.

Filters (``common.sql_filters`` with ``SqlServerRules``): text compares exactly, as on every
engine, whatever the column's collation (usually case-insensitive on SQL Server): under
``Latin1_General_100_BIN2``, with ``NCHAR(0)`` appended to both sides so that SQL Server's
trailing-space padding cannot equate ``'a'`` and ``'a '``, ordered by UTF-16 code unit; ``like``
the same way, with ``[`` a plain character. ``bit`` is boolean, ``tinyint`` 0-255,
``datetimeoffset`` compared in UTC; see ``SqlServerRules`` for the details and the limits.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import and_, case, cast, literal, literal_column, select, table
from sqlalchemy import column as sql_column
from sqlalchemy.dialects.mssql import NVARCHAR
from sqlalchemy.dialects.mssql.base import MSTypeCompiler
from sqlalchemy.dialects.mssql.pyodbc import MSDialect_pyodbc
from sqlalchemy.sql.elements import ClauseElement, ColumnElement

from adapters.datasources.common.sql_filters import (
    LIKE_ESCAPE,
    FilterRules,
    Kind,
    column_kind,
    filtered,
)
from adapters.datasources.common.sql_statements import (
    EncodedStatement,
    encoded_statement,
    positional,
    quoted_table,
    requested,
)
from adapters.datasources.common.sql_values import type_name
from adapters.datasources.mssql.values import SPATIAL_TYPES, converter, output
from domain.connection import DEFAULT_SCHEMA, DatabaseType, Endpoint
from domain.schema import Column, Schema, Table, TableRead

DEFAULT_SCHEMA_NAME = DEFAULT_SCHEMA[DatabaseType.SQL_SERVER]
SYSTEM_SCHEMAS = frozenset({"sys", "information_schema"})


class _TypeCompiler(MSTypeCompiler):
    def visit_string(self, type_: Any, **kw: Any) -> str:
        # Text casts (filters on non-text columns) keep Unicode: NVARCHAR(max), not VARCHAR(30).
        # SQLAlchemy leaves _extend unannotated; it returns the type's DDL text.
        text: str = self._extend(  # type: ignore[no-untyped-call]
            "NVARCHAR", type_, length=type_.length or "max"
        )
        return text


class _Dialect(MSDialect_pyodbc):
    type_compiler_cls = _TypeCompiler


# SQLAlchemy's dialect constructors are unannotated.
_DIALECT = _Dialect(paramstyle="qmark")  # type: ignore[no-untyped-call]


def to_pyodbc(statement: ClauseElement) -> tuple[str, tuple[Any, ...]]:
    """SQL text with ``?`` placeholders and the values in their order, as pyodbc takes them."""
    return positional(statement, _DIALECT)


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


def discovered_schema(records: Sequence[Sequence[Any]]) -> Schema:
    """The schema from the rows of ``discovery_statement``, system objects left out."""
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


# Every text comparison runs under this binary collation: case- and accent-sensitive, each
# character its UTF-16 code unit(s), whatever the column's collation.
BINARY_COLLATION = "Latin1_General_100_BIN2"
# Appended to both sides of every text comparison, so that SQL Server's trailing-space padding
# cannot make "a" equal "a " (see SqlServerRules).
_SENTINEL = literal_column("NCHAR(0)", NVARCHAR())
_TRUE: ColumnElement[Any] = literal_column("'true'")
_FALSE: ColumnElement[Any] = literal_column("'false'")
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
    another text (booleans ``true``/``false``, UUIDs lower-case, spatial values as WKT) or reads
    it through a narrower cast (``sql_variant`` as ``NVARCHAR(4000)``, not a max type)."""
    name = type_name(data_type)
    if kind is Kind.BOOLEAN:
        return case((column == 1, _TRUE), (column == 0, _FALSE))
    if name in SPATIAL_TYPES or name in ("uniqueidentifier", "sql_variant"):
        return output(column, name)
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


Statement = EncodedStatement[tuple[Any, ...]]


def select_statement(endpoint: Endpoint, read: TableRead) -> Statement | None:
    """The statement reading one table, or ``None`` when no column is asked for."""
    chosen, names = requested(read)
    if not names:
        return None
    wanted = sorted(set(names) | set(read.filters))
    source = quoted_table(read.table.name, read.table.schema, wanted)
    outputs = [output(source.c[n], chosen[n].data_type) for n in names]
    query = filtered(source, outputs, read, endpoint.database_name, rules=RULES)
    return encoded_statement(read, chosen, names, to_pyodbc(query), converter)
