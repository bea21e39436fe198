"""The ten filter operators of reference §4.2 as SQLAlchemy Core clauses, for any SQL dialect.

Values are converted by the column's discovered type, never guessed from its name, and always
end up as bound parameters:

==============  ===========================================================================
kind            accepted JSON values → bound Python value
==============  ===========================================================================
integer         integers, integral numbers, strings of ASCII digits → ``int`` (range-checked
                for the PostgreSQL/MySQL/SQL Server integer types)
numeric         numbers, decimal strings → ``Decimal`` (finite only)
float           numbers, decimal strings → ``float`` (finite only)
boolean         ``true``/``false``, ``"true"``/``"false"`` (any case), ``0``/``1``
date            ``"YYYY-MM-DD"`` → ``date``
timestamp       ISO 8601 date or date-time → naive ``datetime`` (an offset is converted to UTC,
                naive columns being read as UTC)
timestamptz     ISO 8601 date or date-time → aware ``datetime`` (no offset means UTC)
time / timetz   ``"HH:MM[:SS[.ffffff]]"`` (timetz: offset optional, UTC when absent) → ``time``
uuid            UUID strings → ``UUID``
text            strings as they are; numbers as their decimal text
other           (json, bytea, arrays, intervals, network, geometric, ranges, enums, ...) the
                column is compared as text (``CAST(col AS VARCHAR)``), values as for ``text``
==============  ===========================================================================

Operator semantics: ``eq`` one value ``=``, several ``IN``; ``null`` among ``eq``/``in`` values
adds ``IS NULL`` (OR-ed), among ``ne``/``nin`` values adds ``IS NOT NULL`` (AND-ed), so that a
NULL in a list never silently matches nothing; ``between`` is inclusive and a date-only upper
bound on a timestamp column means the end of that day (``23:59:59.999999``); ``like`` is
``LIKE`` with ``%``/``_`` wildcards and ``\\`` as the escape character on every engine
(case sensitivity is the column collation's); non-text columns are cast to text for ``like``.
Several operators on one field are AND-ed, in the reference's order. An operator with no values
is ignored. A value that does not convert raises ``InvalidRequest`` (FET-0401).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal, InvalidOperation
from enum import Enum
from typing import Any
from uuid import UUID

from sqlalchemy import String, and_, cast, literal, or_
from sqlalchemy.sql.elements import ColumnElement

from domain.errors import InvalidRequest

LIKE_ESCAPE = "\\"
ORDER: tuple[str, ...] = ("eq", "gt", "gte", "lt", "lte", "between", "in", "nin", "ne", "like")
_NULL_OPS = frozenset({"eq", "in", "ne", "nin"})
_COMPARISONS: dict[str, Callable[[Any, Any], Any]] = {
    "gt": operator.gt,
    "gte": operator.ge,
    "lt": operator.lt,
    "lte": operator.le,
}


class Kind(Enum):
    INTEGER = "integer"
    NUMERIC = "numeric"
    FLOAT = "float"
    BOOLEAN = "boolean"
    DATE = "date"
    TIMESTAMP = "timestamp"
    TIMESTAMPTZ = "timestamptz"
    TIME = "time"
    TIMETZ = "timetz"
    UUID = "uuid"
    TEXT = "text"
    OTHER = "other"


_EXPECTED: dict[Kind, str] = {
    Kind.INTEGER: "an integer",
    Kind.NUMERIC: "a decimal number",
    Kind.FLOAT: "a number",
    Kind.BOOLEAN: "a boolean",
    Kind.DATE: "a date (YYYY-MM-DD)",
    Kind.TIMESTAMP: "an ISO 8601 date or timestamp",
    Kind.TIMESTAMPTZ: "an ISO 8601 date or timestamp",
    Kind.TIME: "a time (HH:MM:SS) without offset",
    Kind.TIMETZ: "a time (HH:MM:SS)",
    Kind.UUID: "a UUID",
    Kind.TEXT: "a string",
    Kind.OTHER: "a string",
}


# Type names of every engine, lower-cased, without "(n)" parameters or "unsigned".
# fmt: off
_KINDS: dict[str, Kind] = {
    **dict.fromkeys(
        ("smallint", "integer", "bigint", "int", "int2", "int4", "int8", "tinyint", "mediumint",
         "smallserial", "serial", "bigserial", "serial2", "serial4", "serial8", "year"),
        Kind.INTEGER),
    **dict.fromkeys(("numeric", "decimal", "number", "dec", "fixed"), Kind.NUMERIC),
    **dict.fromkeys(
        ("real", "double precision", "double", "float", "float4", "float8", "binary_float",
         "binary_double"),
        Kind.FLOAT),
    **dict.fromkeys(("boolean", "bool"), Kind.BOOLEAN),
    "date": Kind.DATE,
    **dict.fromkeys(
        ("timestamp without time zone", "timestamp", "datetime", "datetime2", "smalldatetime"),
        Kind.TIMESTAMP),
    **dict.fromkeys(
        ("timestamp with time zone", "timestamptz", "datetimeoffset",
         "timestamp with local time zone"),
        Kind.TIMESTAMPTZ),
    **dict.fromkeys(("time without time zone", "time"), Kind.TIME),
    **dict.fromkeys(("time with time zone", "timetz"), Kind.TIMETZ),
    **dict.fromkeys(("uuid", "uniqueidentifier"), Kind.UUID),
    **dict.fromkeys(
        ("text", "character varying", "varchar", "character", "char", "bpchar", "name", '"char"',
         "citext", "nvarchar", "nchar", "ntext", "tinytext", "mediumtext", "longtext", "varchar2",
         "nvarchar2", "clob", "nclob", "enum", "set", "string"),
        Kind.TEXT),
}
_INT_BITS = {"smallint": 16, "int2": 16, "integer": 32, "int": 32, "int4": 32, "bigint": 64,
             "int8": 64, "tinyint": 8, "mediumint": 24}
# fmt: on
_PARAMS_RE = re.compile(r"\([^)]*\)")
_INTEGER_RE = re.compile(r"[+-]?[0-9]+", re.ASCII)
_DECIMAL_RE = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)
_DATE_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", re.ASCII)
_END_OF_DAY = timedelta(days=1, microseconds=-1)


def _type_name(data_type: str) -> str:
    name = _PARAMS_RE.sub("", data_type.lower())
    return " ".join(name.replace("unsigned", " ").replace("zerofill", " ").split())


def column_kind(data_type: str) -> Kind:
    """The filter kind of a discovered column type (unknown types compare as text)."""
    return _KINDS.get(_type_name(data_type), Kind.OTHER)


class _Unconvertible(Exception):
    pass


def _integer(value: Any, data_type: str) -> int:
    if isinstance(value, bool):
        raise _Unconvertible
    if isinstance(value, int):
        result = value
    elif isinstance(value, float) and value.is_integer():
        result = int(value)
    elif isinstance(value, str) and _INTEGER_RE.fullmatch(value):
        result = int(value)
    else:
        raise _Unconvertible
    bits = _INT_BITS.get(_type_name(data_type))
    if bits is not None:
        if "unsigned" in data_type.lower():
            low, high = 0, 2**bits - 1
        else:
            low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
        if not low <= result <= high:
            raise _Unconvertible
    return result


def _numeric_text(value: Any) -> str:
    if isinstance(value, bool):
        raise _Unconvertible
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str) and _DECIMAL_RE.fullmatch(value):
        return value
    raise _Unconvertible


def _numeric(value: Any, data_type: str) -> Decimal:
    try:
        result = Decimal(_numeric_text(value))
    except InvalidOperation as error:
        raise _Unconvertible from error
    if not result.is_finite():
        raise _Unconvertible
    return result


def _float(value: Any, data_type: str) -> float:
    result = float(_numeric_text(value))
    if result != result or result in (float("inf"), float("-inf")):
        raise _Unconvertible
    return result


def _boolean(value: Any, data_type: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise _Unconvertible


def _date(value: Any, data_type: str) -> date:
    if not isinstance(value, str) or not _DATE_RE.fullmatch(value):
        raise _Unconvertible
    return date.fromisoformat(value)


def _datetime(value: Any) -> datetime:
    if not isinstance(value, str) or not _DATE_RE.match(value):
        raise _Unconvertible
    return datetime.fromisoformat(value)


def _timestamp(value: Any, data_type: str) -> datetime:
    result = _datetime(value)
    if result.tzinfo is not None:
        result = result.astimezone(UTC).replace(tzinfo=None)
    return result


def _timestamptz(value: Any, data_type: str) -> datetime:
    result = _datetime(value)
    return result.replace(tzinfo=UTC) if result.tzinfo is None else result


def _time_of_day(value: Any) -> time:
    if not isinstance(value, str) or not value[:1].isdigit():
        raise _Unconvertible
    return time.fromisoformat(value)


def _time(value: Any, data_type: str) -> time:
    result = _time_of_day(value)
    if result.tzinfo is not None:
        raise _Unconvertible
    return result


def _timetz(value: Any, data_type: str) -> time:
    result = _time_of_day(value)
    return result.replace(tzinfo=UTC) if result.tzinfo is None else result


def _uuid(value: Any, data_type: str) -> UUID:
    if not isinstance(value, str):
        raise _Unconvertible
    return UUID(value)


def _text(value: Any, data_type: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        raise _Unconvertible
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    raise _Unconvertible


_CONVERTERS: dict[Kind, Callable[[Any, str], Any]] = {
    Kind.INTEGER: _integer,
    Kind.NUMERIC: _numeric,
    Kind.FLOAT: _float,
    Kind.BOOLEAN: _boolean,
    Kind.DATE: _date,
    Kind.TIMESTAMP: _timestamp,
    Kind.TIMESTAMPTZ: _timestamptz,
    Kind.TIME: _time,
    Kind.TIMETZ: _timetz,
    Kind.UUID: _uuid,
    Kind.TEXT: _text,
    Kind.OTHER: _text,
}


def _shown(value: Any) -> str:
    text = repr(value) if not isinstance(value, str) else f"'{value}'"
    return text if len(text) <= 80 else text[:77] + "..."


class _Field:
    """One filtered column: its expression, kind and how to report a bad value."""

    def __init__(self, column: ColumnElement[Any], data_type: str, where: str) -> None:
        self.kind = column_kind(data_type)
        self.data_type = data_type
        self.where = where
        self.column = column
        self.compared: ColumnElement[Any] = (
            cast(column, String) if self.kind is Kind.OTHER else column
        )

    def error(self, op: str, message: str) -> InvalidRequest:
        return InvalidRequest(f"filter on {self.where}: operator '{op}' {message}")

    def convert(self, op: str, value: Any) -> Any:
        try:
            return _CONVERTERS[self.kind](value, self.data_type)
        except (_Unconvertible, ValueError, OverflowError):
            raise self.error(
                op,
                f"expects {_EXPECTED[self.kind]} for column type '{self.data_type}', "
                f"got {_shown(value)}",
            ) from None

    def values(self, op: str, raw: Sequence[Any]) -> tuple[bool, list[Any]]:
        """(whether null was among the values, the other values converted)."""
        has_null = any(v is None for v in raw)
        if has_null and op not in _NULL_OPS:
            raise self.error(op, "does not accept null (only eq, ne, in and nin do)")
        return has_null, [self.convert(op, v) for v in raw if v is not None]

    def single(self, op: str, raw: Sequence[Any]) -> Any:
        if len(raw) != 1:
            raise self.error(op, f"must have exactly 1 value, got {len(raw)}")
        return literal(self.values(op, raw)[1][0])


def _members(f: _Field, op: str, raw: Sequence[Any]) -> ColumnElement[bool]:
    has_null, values = f.values(op, raw)
    if not values:
        return f.column.is_(None)
    match = f.compared == literal(values[0]) if len(values) == 1 else f.compared.in_(values)
    return or_(f.column.is_(None), match) if has_null else match


def _non_members(f: _Field, op: str, raw: Sequence[Any]) -> ColumnElement[bool]:
    has_null, values = f.values(op, raw)
    if not values:
        return f.column.is_not(None)
    miss = f.compared != literal(values[0]) if len(values) == 1 else f.compared.not_in(values)
    return and_(f.column.is_not(None), miss) if has_null else miss


def _between(f: _Field, raw: Sequence[Any]) -> ColumnElement[bool]:
    if len(raw) != 2:
        raise f.error("between", f"must have exactly 2 values, got {len(raw)}")
    _, (low, high) = f.values("between", raw)
    if (
        f.kind in (Kind.TIMESTAMP, Kind.TIMESTAMPTZ)
        and isinstance(raw[1], str)
        and _DATE_RE.fullmatch(raw[1])
    ):
        high = high + _END_OF_DAY
    return and_(f.compared >= literal(low), f.compared <= literal(high))


def _like(f: _Field, raw: Sequence[Any]) -> ColumnElement[bool]:
    if len(raw) != 1 or not isinstance(raw[0], str):
        raise f.error("like", "takes exactly 1 string pattern")
    target = f.column if f.kind is Kind.TEXT else cast(f.column, String)
    return target.like(raw[0], escape=LIKE_ESCAPE)


def filter_clauses(
    column: ColumnElement[Any],
    data_type: str,
    condition: Mapping[str, Sequence[Any]],
    *,
    where: str,
) -> list[ColumnElement[bool]]:
    """Clauses (to be AND-ed) for one field's condition ``{op: values}``.

    ``where`` names the field in error messages, e.g. ``"'orders.total' of datasource 'crm'"``.
    """
    unknown = [op for op in condition if op not in ORDER]
    if unknown:
        raise InvalidRequest(
            f"filter on {where}: unknown operator '{unknown[0]}' "
            f"(expected one of {', '.join(ORDER)})"
        )
    f = _Field(column, data_type, where)
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
            clauses.append(_COMPARISONS[op](f.compared, f.single(op, raw)))
        elif op == "between":
            clauses.append(_between(f, raw))
        else:
            clauses.append(_like(f, raw))
    return clauses
