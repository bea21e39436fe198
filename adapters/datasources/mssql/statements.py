"""SQL Server statements, built with SQLAlchemy Core's ``mssql`` dialect: discovery and reads.

Identifiers are bracket-quoted, values ``?`` parameters bound by pyodbc. Discovery reads
``INFORMATION_SCHEMA`` for base tables in the scope (default ``dbo``); tables are keyed ``table``
in ``dbo`` and ``schema.table`` elsewhere; ``sys``, ``INFORMATION_SCHEMA`` and ``db_*`` schemas
and ``db_*`` tables are left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any
from typing import cast as typing_cast

from sqlalchemy import and_, select, table
from sqlalchemy import column as sql_column
from sqlalchemy.dialects.mssql.base import MSTypeCompiler
from sqlalchemy.dialects.mssql.pyodbc import MSDialect_pyodbc
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import ClauseElement, quoted_name

from adapters.datasources.common.encoding import RowEncoder
from adapters.datasources.mssql.filters import RULES
from adapters.datasources.mssql.values import converter, output
from adapters.datasources.common.sql_filters import filtered
from domain.connection import DEFAULT_SCHEMA, DatabaseType, Endpoint
from domain.schema import TableRead

DEFAULT_SCHEMA_NAME = DEFAULT_SCHEMA[DatabaseType.SQL_SERVER]
SYSTEM_SCHEMAS = frozenset({"sys", "information_schema"})


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


@dataclass(frozen=True, slots=True)
class Statement:
    result_key: str
    sql: str
    params: tuple[Any, ...]
    encoder: RowEncoder


def select_statement(endpoint: Endpoint, read: TableRead) -> Statement | None:
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
    outputs = [output(source.c[n], chosen[n].data_type) for n in names]
    query = filtered(
        select(*outputs).select_from(source),
        read,
        endpoint.database_name,
        lambda field: source.c[field],
        rules=RULES,
    )
    sql, params = to_pyodbc(query)
    converters = {
        i: f for i, n in enumerate(names) if (f := converter(chosen[n].data_type)) is not None
    }
    return Statement(read.result_key, sql, params, RowEncoder(names, converters))
