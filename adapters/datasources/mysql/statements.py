"""MySQL / MariaDB statements, built with SQLAlchemy Core: discovery, extraction and filters.

Discovery: base tables of ``DATABASE()`` (none when that is a system schema), unqualified names,
columns in ordinal order with ``COLUMN_TYPE`` lower-cased (``int(11)``, ``decimal(18,2)``,
``tinyint(1)``, ``bigint(20) unsigned``), ``enum``/``set`` without their values, and ``json`` for
MySQL JSON columns and MariaDB's (``longtext`` with a ``json_valid`` check).

Filters (``common.sql_filters``) mean the same as on PostgreSQL: text and ``other`` columns compare
as their UTF-8 bytes (exact, case-sensitive, no trailing-space padding, code point order); equality
with ASCII values also compares the column itself first, so an index can serve it; ``like`` runs
under ``utf8mb4_bin`` (case-sensitive, ``_`` is one character); BOOLEAN columns compare as
``col <> 0``; ``float`` columns compare with the value rounded to single precision.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import LargeBinary, and_, case, cast, literal, table
from sqlalchemy import column as sql_column
from sqlalchemy.dialects.mysql import CHAR
from sqlalchemy.dialects.mysql.base import MySQLDialect
from sqlalchemy.sql.elements import ClauseElement, ColumnElement

from adapters.datasources.common.encoding import row_factory
from adapters.datasources.common.sql_filters import (
    LIKE_ESCAPE,
    FilterRules,
    Kind,
    column_kind,
    filtered,
)
from adapters.datasources.common.sql_statements import positional, requested
from adapters.datasources.common.sql_values import Unconvertible, type_name
from adapters.datasources.mysql.values import BOOLEAN_TYPES, SPATIAL_TYPES, output
from domain.connection import Endpoint
from domain.schema import Column, Schema, Table, TableRead

SYSTEM_SCHEMAS = frozenset({"mysql", "information_schema", "performance_schema", "sys"})

DISCOVER_SQL = """
SELECT DATABASE(), t.TABLE_NAME, c.COLUMN_NAME, c.DATA_TYPE, c.COLUMN_TYPE
FROM information_schema.TABLES AS t
LEFT JOIN information_schema.COLUMNS AS c
  ON c.TABLE_SCHEMA = t.TABLE_SCHEMA AND c.TABLE_NAME = t.TABLE_NAME
WHERE t.TABLE_SCHEMA = DATABASE() AND t.TABLE_TYPE = 'BASE TABLE'
ORDER BY t.TABLE_NAME, c.ORDINAL_POSITION
"""
# MariaDB's JSON is LONGTEXT with a column-level CHECK (json_valid(`col`)).
MARIADB_JSON_SQL = """
SELECT TABLE_NAME, CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS
WHERE CONSTRAINT_SCHEMA = DATABASE() AND LEVEL = 'Column'
"""
_FLOAT32 = struct.Struct("<f")


def _as_utf8(column: ColumnElement[Any]) -> ColumnElement[Any]:
    return cast(column, CHAR(charset="utf8mb4"))


def _as_bytes(column: ColumnElement[Any]) -> ColumnElement[Any]:
    return cast(_as_utf8(column), LargeBinary)


class MySqlRules(FilterRules):
    """The operators' common meaning on MySQL and MariaDB, whatever the columns' collations."""

    def kind(self, data_type: str) -> Kind:
        if data_type in BOOLEAN_TYPES:
            return Kind.BOOLEAN
        name = type_name(data_type)
        if name == "bit":
            return Kind.INTEGER
        if name in SPATIAL_TYPES:
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


_DIALECT = MySQLDialect(paramstyle="format")


def to_mysql(statement: ClauseElement) -> tuple[str, tuple[Any, ...]]:
    """SQL text with ``%s`` placeholders and the positional values, as aiomysql takes them
    (always a tuple, so that the driver turns SQLAlchemy's ``%%`` back into ``%``)."""
    return positional(statement, _DIALECT)


@dataclass(frozen=True, slots=True)
class Statement:
    result_key: str
    sql: str
    params: tuple[Any, ...]
    row: Callable[..., Any]


def select_statement(endpoint: Endpoint, read: TableRead) -> Statement | None:
    """The statement reading one table, or ``None`` when no column is asked for; a filter that
    does not fit raises ``InvalidRequest``."""
    chosen, names = requested(read)
    if not names:
        return None
    wanted = set(names) | set(read.filters)
    source = table(read.table.name, *(sql_column(n) for n in sorted(wanted)))
    outputs = []
    converters: dict[int, Callable[[Any], Any]] = {}
    for index, name in enumerate(names):
        expression, convert = output(source.c[name], chosen[name].data_type)
        outputs.append(expression.label(name))
        if convert is not None:
            converters[index] = convert
    query = filtered(source, outputs, read, endpoint.database_name, rules=RULES)
    sql, params = to_mysql(query)
    return Statement(read.result_key, sql, params, row_factory(names, converters))


def discovered_schema(
    records: Sequence[tuple[Any, ...]], checks: Sequence[tuple[str, str]]
) -> Schema:
    """The schema from the rows of ``DISCOVER_SQL`` and, on MariaDB, ``MARIADB_JSON_SQL``."""
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


def _json_check(column_name: str) -> str:
    return "json_valid(`" + column_name.replace("`", "``") + "`)"
