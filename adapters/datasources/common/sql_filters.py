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
compare columns as they are.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any

from sqlalchemy import Select, String, and_, cast, literal, or_
from sqlalchemy.sql.elements import ColumnElement

from adapters.datasources.common.sql_values import (
    DATE_RE,
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

LIKE_ESCAPE = "\\"
ORDER: tuple[str, ...] = ("eq", "gt", "gte", "lt", "lte", "between", "in", "nin", "ne", "like")
_NULL_OPS = frozenset({"eq", "in", "ne", "nin"})
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


def _shown(value: Any) -> str:
    text = repr(value) if not isinstance(value, str) else f"'{value}'"
    return text if len(text) <= 80 else text[:77] + "..."


def _ends_with_escape(pattern: str) -> bool:
    trailing = len(pattern) - len(pattern.rstrip(LIKE_ESCAPE))
    return trailing % 2 == 1


class _Field:
    """One filtered column: its expression, kind and how to report a bad value."""

    def __init__(
        self, column: ColumnElement[Any], data_type: str, where: str, rules: FilterRules
    ) -> None:
        self.rules = rules
        self.kind = rules.kind(data_type)
        self.data_type = data_type
        self.where = where
        self.column = column
        self.ordered = rules.ordered(column, self.kind, data_type)

    def error(self, op: str, message: str) -> InvalidRequest:
        return InvalidRequest(f"filter on {self.where}: operator '{op}' {message}")

    def convert(self, op: str, value: Any) -> Any:
        try:
            return self.rules.convert(self.kind, self.data_type, value)
        except Unconvertible as error:
            expected = error.expected or EXPECTED[self.kind]
            raise self.error(
                op, f"expects {expected} for column type '{self.data_type}', got {_shown(value)}"
            ) from None

    def values(self, op: str, raw: Sequence[Any]) -> tuple[bool, list[Any]]:
        """(whether null was among the values, the other values converted)."""
        has_null = any(v is None for v in raw)
        if has_null and op not in _NULL_OPS:
            raise self.error(op, "does not accept null (only eq, ne, in and nin do)")
        return has_null, [self.convert(op, v) for v in raw if v is not None]

    def operand(self, value: Any) -> ColumnElement[Any]:
        return self.rules.operand(self.kind, self.data_type, value)

    def single(self, op: str, raw: Sequence[Any]) -> ColumnElement[Any]:
        if len(raw) != 1:
            raise self.error(op, f"must have exactly 1 value, got {len(raw)}")
        return self.operand(self.values(op, raw)[1][0])


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
    if len(raw) != 2:
        raise f.error("between", f"must have exactly 2 values, got {len(raw)}")
    _, (low, high) = f.values("between", raw)
    if (
        f.kind in (Kind.TIMESTAMP, Kind.TIMESTAMPTZ)
        and isinstance(raw[1], str)
        and DATE_RE.fullmatch(raw[1])
    ):
        high = high + _END_OF_DAY
    return and_(f.ordered >= f.operand(low), f.ordered <= f.operand(high))


def _like(f: _Field, raw: Sequence[Any]) -> ColumnElement[bool]:
    if len(raw) != 1 or not isinstance(raw[0], str):
        raise f.error("like", "takes exactly 1 string pattern")
    try:
        pattern = valid_text(raw[0])
    except Unconvertible:
        raise f.error("like", "takes a pattern of valid Unicode characters") from None
    if _ends_with_escape(pattern):
        raise f.error("like", f"pattern must not end with the escape character '{LIKE_ESCAPE}'")
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
    unknown = [op for op in condition if op not in ORDER]
    if unknown:
        raise InvalidRequest(
            f"filter on {where}: unknown operator '{unknown[0]}' "
            f"(expected one of {', '.join(ORDER)})"
        )
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
            clauses.append(_COMPARISONS[op](f.ordered, f.single(op, raw)))
        elif op == "between":
            clauses.append(_between(f, raw))
        else:
            clauses.append(_like(f, raw))
    return clauses


def filtered(
    query: Select[Any],
    read: TableRead,
    database: str,
    column: Callable[[str], ColumnElement[Any]],
    *,
    rules: FilterRules,
) -> Select[Any]:
    """``query`` with the filters of ``read`` AND-ed into its ``WHERE`` (unchanged without any).

    ``column(field)`` is the statement's column for a filtered field (an engine may read a field
    under another physical name); ``database`` names the datasource in error messages. A field
    that is not a column of the table, or a value that does not fit, raises ``InvalidRequest``.
    """
    clauses: list[ColumnElement[bool]] = []
    for field, condition in read.filters.items():
        found = read.table.column(field)
        where = f"'{read.result_key}.{field}' of database '{database}'"
        if found is None:
            raise InvalidRequest(f"filter on {where}: the field is not a column of the table")
        clauses.extend(
            filter_clauses(column(field), found.data_type, condition, where=where, rules=rules)
        )
    return query.where(and_(*clauses)) if clauses else query
