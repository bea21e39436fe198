"""Oracle statements, built with SQLAlchemy Core's ``oracle`` dialect: discovery, reads and
filters.

Owners are the schemas. Discovery reads ``ALL_TABLES``/``ALL_TAB_COLUMNS`` for the owners in the
scope (upper-cased) plus the connected user; tables are keyed ``TABLE`` for the user's own and
``OWNER.TABLE`` otherwise, upper-cased (reference §4.4), and so are column names; the physical
names are kept for the statements, so quoted mixed-case names work. System objects are removed
(reference §3.8). Identifiers are quoted, values named ``:pN`` parameters.

Filters (``common.sql_filters`` with ``OracleRules``): text compares exactly, as on every engine:
a bound string against ``VARCHAR2`` compares without blank padding, and binary, since every
extraction session runs ``SESSION_SQL`` first, setting ``NLS_COMP`` and ``NLS_SORT`` to
``BINARY`` (the defaults, but an instance parameter or a logon trigger may make them linguistic).
An empty string is refused as a value (Oracle stores it as NULL). ``DATE`` carries a time of day,
so it is filtered as a timestamp; time-zone columns compare in UTC; ``CLOB`` comparisons use its
first 4000 characters; see ``OracleRules`` for the details and the limits.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import String, and_, cast, func, select
from sqlalchemy.dialects.oracle.oracledb import OracleDialect_oracledb
from sqlalchemy.sql import visitors
from sqlalchemy.sql.elements import BindParameter, ClauseElement, ColumnElement

from adapters.datasources.common.sql_filters import (
    LIKE_ESCAPE,
    FilterRules,
    Kind,
    column_kind,
    filtered,
)
from adapters.datasources.common.sql_statements import (
    EncodedStatement,
    compiled,
    encoded_statement,
    quoted_table,
    requested,
)
from adapters.datasources.common.sql_values import Unconvertible
from adapters.datasources.oracle.values import (
    LOB_TEXT,
    TZ_TYPES,
    base_type,
    column_type,
    converter,
    output,
)
from domain.connection import Endpoint
from domain.schema import Column, Schema, Table, TableRead

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


def discovered_schema(records: Sequence[Sequence[Any]], user: str) -> Schema:
    """The schema from the rows of ``discovery_statement`` (``user``: the connected user), system
    objects left out."""
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


# SQLAlchemy's dialect constructors are unannotated.
_DIALECT = OracleDialect_oracledb()  # type: ignore[no-untyped-call]


def to_oracledb(statement: ClauseElement) -> tuple[str, dict[str, Any]]:
    """SQL text with ``:p1``, ``:p2``... placeholders and the values by name, as oracledb takes
    them. Parameters are renamed so that no column name (quotes, spaces, length) reaches them."""
    counter = itertools.count(1)

    def rename(bind: BindParameter[Any]) -> None:
        bind.key = f"p{next(counter)}"

    renamed = visitors.cloned_traverse(statement, {}, {"bindparam": rename})
    built = compiled(renamed, _DIALECT)
    return built.string, dict(built.params)


def discovery_statement(owners: Sequence[str]) -> tuple[str, dict[str, Any]]:
    tables = quoted_table("ALL_TABLES", None, ("OWNER", "TABLE_NAME"))
    columns = quoted_table(
        "ALL_TAB_COLUMNS",
        None,
        ("OWNER", "TABLE_NAME", "COLUMN_NAME", "DATA_TYPE", "DATA_PRECISION", "DATA_SCALE",
         "COLUMN_ID"),
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


# Run first in every extraction session: OracleRules rely on binary text comparison, whatever
# the instance parameters or a logon trigger set.
SESSION_SQL = "ALTER SESSION SET NLS_COMP = BINARY NLS_SORT = BINARY"


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
        base = base_type(data_type)
        if base == "date" or base in TZ_TYPES:
            return Kind.TIMESTAMP
        return column_kind(data_type)

    def bind(self, kind: Kind, data_type: str, value: Any) -> Any:
        if value == "" and kind in (Kind.TEXT, Kind.OTHER):
            raise Unconvertible("a non-empty string (Oracle stores an empty string as NULL)")
        return value

    def compared(
        self, column: ColumnElement[Any], kind: Kind, data_type: str
    ) -> ColumnElement[Any]:
        base = base_type(data_type)
        if base in TZ_TYPES:
            return func.sys_extract_utc(column)
        if base in LOB_TEXT:
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


Statement = EncodedStatement[dict[str, Any]]


def select_statement(endpoint: Endpoint, read: TableRead) -> Statement | None:
    """The statement reading one table, or ``None`` when no column is asked for."""
    chosen, names = requested(read)
    if not names:
        return None
    physical = {c.name: _physical(c) for c in (*read.table.columns, *read.columns)}
    wanted = sorted({physical.get(n, n) for n in (*names, *read.filters)})
    source = quoted_table(read.table.name, read.table.schema, wanted)
    outputs = [output(source.c[physical[n]], chosen[n].data_type) for n in names]
    query = filtered(
        source,
        outputs,
        read,
        endpoint.database_name,
        rules=RULES,
        column=lambda field: source.c[physical[field]],
    )
    return encoded_statement(read, chosen, names, to_oracledb(query), converter)
