"""Oracle statements, built with SQLAlchemy Core's ``oracle`` dialect: discovery and reads.

Owners are the schemas. Discovery reads ``ALL_TABLES``/``ALL_TAB_COLUMNS`` for the owners in the
scope (upper-cased) plus the connected user; tables are keyed ``TABLE`` for the user's own and
``OWNER.TABLE`` otherwise, upper-cased (reference §4.4), and so are column names; the physical
names are kept for the statements, so quoted mixed-case names work. System objects are removed
(reference §3.8). Identifiers are quoted, values named ``:pN`` parameters.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any
from typing import cast as typing_cast

from sqlalchemy import and_, select, table
from sqlalchemy import column as sql_column
from sqlalchemy.dialects.oracle.oracledb import OracleDialect_oracledb
from sqlalchemy.sql import visitors
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import BindParameter, ClauseElement, quoted_name

from adapters.datasources.common.encoding import RowEncoder
from adapters.datasources.oracle.filters import RULES
from adapters.datasources.oracle.values import converter, output
from adapters.datasources.common.sql_filters import filtered
from domain.connection import Endpoint
from domain.schema import Column, TableRead

SYSTEM_PREFIXES = ("LOGMNR", "REDO_", "MVIEW$", "AQ$", "DEF$", "REPCAT$", "SQLPLUS_")
SYSTEM_NAMES = frozenset(
    {
        "REDO_LOG", "REDO_DB", "PLAN_TABLE", "SYS", "SYSTEM", "OUTLN", "XDB", "MDSYS", "CTXSYS",
        "DBSNMP", "WMSYS", "EXFSYS", "ORDSYS", "ORDDATA", "ORDPLUGINS", "SI_INFORMTN_SCHEMA",
        "APEX_PUBLIC_USER", "APEX_040000", "APEX_030200", "FLOWS_FILES", "ANONYMOUS",
    }
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class OracleColumn(Column):
    """A discovered column: ``name`` upper-cased (what requests and results use), ``physical``
    as the dictionary spells it (what statements use)."""

    physical: str = ""


def is_system(name: str) -> bool:
    name = name.upper()
    return "$" in name or name.startswith(SYSTEM_PREFIXES) or name in SYSTEM_NAMES


def table_key(owner: str, name: str, user: str) -> str:
    return name.upper() if owner == user else f"{owner}.{name}".upper()


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


def _physical(column: Column) -> str:
    return column.physical if isinstance(column, OracleColumn) and column.physical else column.name


@dataclass(frozen=True, slots=True)
class Statement:
    result_key: str
    sql: str
    params: dict[str, Any]
    encoder: RowEncoder


def select_statement(endpoint: Endpoint, read: TableRead) -> Statement | None:
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
    outputs = [output(source.c[physical[n]], chosen[n].data_type) for n in names]
    query = filtered(
        select(*outputs).select_from(source),
        read,
        endpoint.database_name,
        lambda field: source.c[physical[field]],
        rules=RULES,
    )
    sql, params = to_oracledb(query)
    converters = {
        i: f for i, n in enumerate(names) if (f := converter(chosen[n].data_type)) is not None
    }
    return Statement(read.result_key, sql, params, RowEncoder(names, converters))
