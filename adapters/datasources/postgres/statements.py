"""PostgreSQL statements, built with SQLAlchemy Core: discovery, reads and filters.

Statements use quoted identifiers and asyncpg's ``$n`` parameters, without bind casts (the
server infers each parameter's type from what it is compared with). Nothing from a request
reaches the SQL text except catalog-checked identifiers through SQLAlchemy's quoting. Columns
whose asyncpg value does not encode as the common result format are cast on the server
(``values``).

Discovery: base tables of the schemas in the scope (default ``public``), keyed ``table`` in
``public`` and ``schema.table`` elsewhere, ``pg_*`` and ``information_schema`` left out; array
and user-defined columns are typed by their ``udt_name`` (``_int4``, ``citext``...).

Filters (``common.sql_filters`` with ``PostgresRules``) mean the same as on every engine: text
compares exactly and orders by code point (``COLLATE "C"``), ``like`` is case-sensitive.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import cast, func, select, table
from sqlalchemy import column as sql_column
from sqlalchemy.dialects.postgresql import TEXT
from sqlalchemy.dialects.postgresql.base import PGDialect
from sqlalchemy.engine.interfaces import BindTyping
from sqlalchemy.sql.elements import ClauseElement, ColumnElement

from adapters.datasources.common.encoding import row_builder
from adapters.datasources.common.sql_filters import LIKE_ESCAPE, FilterRules, Kind, filtered
from adapters.datasources.common.sql_statements import positional, requested
from adapters.datasources.common.sql_values import Unconvertible, type_name
from adapters.datasources.postgres.values import output, server_output
from domain.connection import DEFAULT_SCHEMA, DatabaseType, Endpoint
from domain.schema import Column, Schema, Table, TableRead

DEFAULT_SCHEMA_NAME = DEFAULT_SCHEMA[DatabaseType.POSTGRESQL]
SYSTEM_PREFIXES = ("pg_", "information_schema")

DISCOVER_SQL = """
SELECT t.table_schema, t.table_name, c.column_name, c.data_type, c.udt_name
FROM information_schema.tables AS t
LEFT JOIN information_schema.columns AS c
  ON c.table_schema = t.table_schema AND c.table_name = t.table_name
WHERE t.table_type = 'BASE TABLE' AND t.table_schema = ANY($1::text[])
ORDER BY t.table_schema, t.table_name, c.ordinal_position
"""

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
class Statement:
    """One table's read: SQL and values for asyncpg, the row type its records become, and the
    column types it reads."""

    result_key: str
    sql: str
    params: tuple[Any, ...]
    row: Callable[..., Any]
    types: frozenset[str]
    json_sql: str | None = None
    """The same read as one ``row_to_json`` text per row, the same bytes the Python path
    encodes (``values.server_output``), with ``params``; None when a column type needs Python
    or an identifier holds a ``$`` (COPY takes no parameters: asyncpg substitutes every
    ``$n`` in the text with the value's literal)."""


class _SqlDialect(PGDialect):
    """PostgreSQL SQL with asyncpg's ``$n`` placeholders and no bind casts: the server infers
    each parameter's type from the column it is compared with."""

    bind_typing = BindTyping.NONE


# SQLAlchemy's dialect constructors are unannotated.
_DIALECT = _SqlDialect(paramstyle="numeric_dollar")  # type: ignore[no-untyped-call]


def to_asyncpg(statement: ClauseElement) -> tuple[str, tuple[Any, ...]]:
    """SQL text with ``$n`` placeholders and the positional values, as asyncpg takes them."""
    return positional(statement, _DIALECT)


def discovered_schema(records: Sequence[Sequence[Any]]) -> Schema:
    """The schema from the rows of ``DISCOVER_SQL``."""
    columns: dict[tuple[str, str], list[Column]] = {}
    for schema_name, table_name, column_name, data_type, udt_name in records:
        found = columns.setdefault((schema_name, table_name), [])
        if column_name is not None:
            kind = udt_name if data_type in ("ARRAY", "USER-DEFINED") else data_type
            found.append(Column(name=column_name, data_type=kind.lower()))
    tables: dict[str, Table] = {}
    for (schema_name, table_name), table_columns in columns.items():
        key = table_name if schema_name == DEFAULT_SCHEMA_NAME else f"{schema_name}.{table_name}"
        if key.startswith(SYSTEM_PREFIXES):
            continue
        tables[key] = Table(schema=schema_name, name=table_name, columns=tuple(table_columns))
    return Schema(tables=tables)


def _json_sql(endpoint: Endpoint, read: TableRead, names: Sequence[str]) -> str | None:
    chosen = {c.name: c for c in read.columns}
    identifiers = [read.table.name, read.table.schema or "", *chosen, *read.filters]
    if any("$" in name for name in identifiers):
        return None
    source = table(
        read.table.name,
        *(sql_column(n) for n in sorted(set(names) | set(read.filters))),
        schema=read.table.schema,
    )
    outputs = []
    for name in names:
        built = server_output(source.c[name], chosen[name].data_type)
        if built is None:
            return None
        outputs.append(built.label(name))
    rows = filtered(source, outputs, read, endpoint.database_name, rules=RULES).subquery("t")
    sql, _ = to_asyncpg(select(func.row_to_json(rows.table_valued())))
    return sql


def select_statement(
    endpoint: Endpoint, read: TableRead, *, server_json: bool = False
) -> Statement | None:
    """The statement reading one table, or ``None`` when no column is asked for; a filter that
    does not fit raises ``InvalidRequest``. With ``server_json``, also the same read as JSON
    built by the server, where it builds the same bytes."""
    chosen, names = requested(read)
    if not names:
        return None
    wanted = set(names) | set(read.filters)
    source = table(
        read.table.name, *(sql_column(n) for n in sorted(wanted)), schema=read.table.schema
    )
    outputs = [output(source.c[n], chosen[n].data_type).label(n) for n in names]
    query = filtered(source, outputs, read, endpoint.database_name, rules=RULES)
    sql, params = to_asyncpg(query)
    types = frozenset(column.data_type for column in read.columns)
    json_sql = _json_sql(endpoint, read, names) if server_json else None
    return Statement(read.result_key, sql, params, row_builder(names), types, json_sql)
