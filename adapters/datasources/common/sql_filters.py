"""The ten filter operators of reference §4.2 as SQLAlchemy Core clauses, for any SQL dialect.

Values are converted by the column's discovered type (``sql_values``) and always end up as bound
parameters; identifiers are SQLAlchemy column objects, quoted by the dialect.

Operator semantics, the same on every engine: ``eq`` one value ``=``, several ``IN``; ``null``
among ``eq``/``in`` values adds ``IS NULL`` (OR-ed), among ``ne``/``nin`` values adds ``IS NOT
NULL`` (AND-ed), so that a NULL in a list never silently matches nothing; ``ne``/``nin`` never
match NULL (SQL's ``<>``); ``between`` is inclusive and a date-only upper bound on a timestamp
column means the end of that day (``23:59:59.999999``). Several operators on one field are AND-ed,
in the reference's order. An operator with no values is ignored. A value that does not convert
raises ``InvalidRequest`` (FET-0401).

Text is compared exactly: case-sensitive, no trailing-space padding, ordered by code point. ``like``
is ``LIKE`` with ``%`` (any run of characters) and ``_`` (exactly one character), ``\\`` escaping
the next character (a pattern may not end with a lone ``\\``); it is **case-sensitive on every
engine**, whatever the column's collation; non-text columns match by their text. Each engine states
how it gets there in a ``FilterRules`` subclass in its ``statements`` module (PostgreSQL:
``COLLATE "C"`` for ordering; MySQL: binary comparison and a ``utf8mb4_bin`` ``LIKE``; SQL Server:
a binary collation and a sentinel against padding; Oracle: binary NLS settings); the defaults here
compare columns as they are. The checks of the values themselves (count, null, the ``like``
pattern's trailing escape) are MongoDB's too: ``filter_fields``.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any

from sqlalchemy import Select, String, and_, cast, literal, or_, select
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.sql.selectable import TableClause

from adapters.datasources.common.filter_fields import (
    LIKE_ESCAPE,
    ORDER,
    FilterField,
    known_operators,
    place,
)
from adapters.datasources.common.sql_values import (
    EXPECTED,
    Kind,
    Unconvertible,
    column_kind,
    convert,
    valid_text,
)
from domain.errors import InvalidRequest
from domain.schema import TableRead

__all__ = ["LIKE_ESCAPE", "ORDER", "FilterRules", "Kind", "column_kind", "filter_clauses"]

_COMPARISONS: dict[str, Callable[[Any, Any], Any]] = {
    "gt": operator.gt,
    "gte": operator.ge,
    "lt": operator.lt,
    "lte": operator.le,
}
_END_OF_DAY = timedelta(days=1, microseconds=-1)


class FilterRules:
    """How one engine makes the operators mean the same as everywhere else.

    The defaults compare a column as it is (a column of an ``OTHER`` kind as its text) with the
    converted values bound unchanged.
    """

    def kind(self, data_type: str) -> Kind:
        return column_kind(data_type)

    def convert(self, kind: Kind, data_type: str, value: Any) -> Any:
        """The value to bind for one JSON filter value; raises ``Unconvertible``."""
        return self.bind(kind, data_type, convert(kind, value, data_type))

    def bind(self, kind: Kind, data_type: str, value: Any) -> Any:
        """The value to bind, from the converted one; may raise ``Unconvertible``."""
        return value

    def compared(
        self, column: ColumnElement[Any], kind: Kind, data_type: str
    ) -> ColumnElement[Any]:
        """What ``=``, ``<>``, ``IN`` and ``NOT IN`` compare."""
        return cast(column, String) if kind is Kind.OTHER else column

    def ordered(self, column: ColumnElement[Any], kind: Kind, data_type: str) -> ColumnElement[Any]:
        """What ``<``, ``<=``, ``>`` and ``>=`` compare."""
        return self.compared(column, kind, data_type)

    def operand(self, kind: Kind, data_type: str, value: Any) -> ColumnElement[Any]:
        """What ``compared``/``ordered`` is compared with for one bound value."""
        return literal(value)

    def any_of(
        self, column: ColumnElement[Any], kind: Kind, data_type: str, values: Sequence[Any]
    ) -> ColumnElement[bool]:
        """The column equals one of ``values`` (never empty)."""
        target = self.compared(column, kind, data_type)
        if len(values) == 1:
            return target == self.operand(kind, data_type, values[0])
        return target.in_(values)

    def none_of(
        self, column: ColumnElement[Any], kind: Kind, data_type: str, values: Sequence[Any]
    ) -> ColumnElement[bool]:
        """The column equals none of ``values`` (never empty); never true for NULL."""
        target = self.compared(column, kind, data_type)
        if len(values) == 1:
            return target != self.operand(kind, data_type, values[0])
        return target.not_in(values)

    def like(
        self, column: ColumnElement[Any], kind: Kind, data_type: str, pattern: str
    ) -> ColumnElement[bool]:
        target = column if kind is Kind.TEXT else cast(column, String)
        return target.like(pattern, escape=LIKE_ESCAPE)


NEUTRAL = FilterRules()


class _Field(FilterField):
    """One filtered column: its expression, kind and the engine's rules."""

    def __init__(
        self, column: ColumnElement[Any], data_type: str, where: str, rules: FilterRules
    ) -> None:
        kind = rules.kind(data_type)
        timestamp = kind in (Kind.TIMESTAMP, Kind.TIMESTAMPTZ)
        super().__init__(where, data_type, _END_OF_DAY if timestamp else None)
        self.rules = rules
        self.kind = kind
        self.data_type = data_type
        self.column = column
        self.ordered = rules.ordered(column, kind, data_type)

    def convert(self, op: str, value: Any) -> Any:
        try:
            return self.rules.convert(self.kind, self.data_type, value)
        except Unconvertible as error:
            raise self.mismatch(op, error.expected or EXPECTED[self.kind], value) from None

    def operand(self, value: Any) -> ColumnElement[Any]:
        return self.rules.operand(self.kind, self.data_type, value)


def _members(f: _Field, op: str, raw: Sequence[Any]) -> ColumnElement[bool]:
    has_null, values = f.values(op, raw)
    if not values:
        return f.column.is_(None)
    match = f.rules.any_of(f.column, f.kind, f.data_type, values)
    return or_(f.column.is_(None), match) if has_null else match


def _non_members(f: _Field, op: str, raw: Sequence[Any]) -> ColumnElement[bool]:
    has_null, values = f.values(op, raw)
    if not values:
        return f.column.is_not(None)
    miss = f.rules.none_of(f.column, f.kind, f.data_type, values)
    return and_(f.column.is_not(None), miss) if has_null else miss


def _between(f: _Field, raw: Sequence[Any]) -> ColumnElement[bool]:
    low, high = f.bounds(raw)
    return and_(f.ordered >= f.operand(low), f.ordered <= f.operand(high))


def _like(f: _Field, raw: Sequence[Any]) -> ColumnElement[bool]:
    pattern = f.pattern(raw)
    try:
        valid_text(pattern)
    except Unconvertible:
        raise f.error("like", "takes a pattern of valid Unicode characters") from None
    return f.rules.like(f.column, f.kind, f.data_type, pattern)


def filter_clauses(
    column: ColumnElement[Any],
    data_type: str,
    condition: Mapping[str, Sequence[Any]],
    *,
    where: str,
    rules: FilterRules = NEUTRAL,
) -> list[ColumnElement[bool]]:
    """Clauses (to be AND-ed) for one field's condition ``{op: values}``.

    ``where`` names the field in error messages, e.g. ``"'orders.total' of database 'crm'"``.
    """
    known_operators(condition, where)
    f = _Field(column, data_type, where, rules)
    clauses: list[ColumnElement[bool]] = []
    for op in ORDER:
        raw = condition.get(op)
        if not raw:
            continue
        if op in ("eq", "in"):
            clauses.append(_members(f, op, raw))
        elif op in ("ne", "nin"):
            clauses.append(_non_members(f, op, raw))
        elif op in _COMPARISONS:
            clauses.append(_COMPARISONS[op](f.ordered, f.operand(f.single(op, raw))))
        elif op == "between":
            clauses.append(_between(f, raw))
        else:
            clauses.append(_like(f, raw))
    return clauses


def filtered(
    source: TableClause,
    outputs: Sequence[ColumnElement[Any]],
    read: TableRead,
    database: str,
    *,
    rules: FilterRules,
    column: Callable[[str], ColumnElement[Any]] | None = None,
) -> Select[Any]:
    """``SELECT outputs FROM source`` with the filters of ``read`` AND-ed into its ``WHERE``
    (none without any).

    ``column(field)`` is the statement's column for a filtered field (by default ``source``'s
    column of that name; an engine may read a field under another physical name); ``database``
    names the datasource in error messages. A field that is not a column of the table, or a
    value that does not fit, raises ``InvalidRequest``.
    """
    query = select(*outputs).select_from(source)
    lookup = column if column is not None else (lambda field: source.c[field])
    clauses: list[ColumnElement[bool]] = []
    for field, condition in read.filters.items():
        found = read.table.column(field)
        where = place(read.result_key, field, database)
        if found is None:
            raise InvalidRequest(f"filter on {where}: the field is not a column of the table")
        clauses.extend(
            filter_clauses(lookup(field), found.data_type, condition, where=where, rules=rules)
        )
    return query.where(and_(*clauses)) if clauses else query
