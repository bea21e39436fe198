"""Filter values typed by the discovered column type, for every SQL engine.

Values are converted by the column's type, never guessed from its name:

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
text            strings as they are (valid Unicode only); numbers as their decimal text
other           (json, bytea, arrays, intervals, network, geometric, ranges, enums, ...) the
                column is compared as text, values as for ``text``
==============  ===========================================================================
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, date, datetime, time
from decimal import Decimal, InvalidOperation
from enum import Enum
from typing import Any
from uuid import UUID


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


EXPECTED: dict[Kind, str] = {
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
INTEGER_RE = re.compile(r"[+-]?[0-9]+", re.ASCII)
DECIMAL_RE = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)
DATE_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", re.ASCII)


def type_name(data_type: str) -> str:
    """A type name without ``(n)`` parameters, ``unsigned`` or ``zerofill``, lower-cased."""
    name = _PARAMS_RE.sub("", data_type.lower())
    return " ".join(name.replace("unsigned", " ").replace("zerofill", " ").split())


def column_kind(data_type: str) -> Kind:
    """The filter kind of a discovered column type (unknown types compare as text)."""
    return _KINDS.get(type_name(data_type), Kind.OTHER)


class Unconvertible(Exception):
    """A value does not fit the column; ``expected`` (optional) says what would."""

    def __init__(self, expected: str | None = None) -> None:
        super().__init__(expected)
        self.expected = expected


def _integer(value: Any, data_type: str) -> int:
    if isinstance(value, bool):
        raise Unconvertible
    if isinstance(value, int):
        result = value
    elif isinstance(value, float) and value.is_integer():
        result = int(value)
    elif isinstance(value, str) and INTEGER_RE.fullmatch(value):
        result = int(value)
    else:
        raise Unconvertible
    bits = _INT_BITS.get(type_name(data_type))
    if bits is not None:
        if "unsigned" in data_type.lower():
            low, high = 0, 2**bits - 1
        else:
            low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
        if not low <= result <= high:
            raise Unconvertible
    return result


def numeric_text(value: Any) -> str:
    """The decimal text of a number or of a decimal string (not of a boolean)."""
    if isinstance(value, bool):
        raise Unconvertible
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str) and DECIMAL_RE.fullmatch(value):
        return value
    raise Unconvertible


def _numeric(value: Any) -> Decimal:
    try:
        result = Decimal(numeric_text(value))
    except InvalidOperation as error:
        raise Unconvertible from error
    if not result.is_finite():
        raise Unconvertible
    return result


def _float(value: Any) -> float:
    result = float(numeric_text(value))
    if result != result or result in (float("inf"), float("-inf")):
        raise Unconvertible
    return result


def boolean(value: Any) -> bool:
    """``true``/``false``, their strings in any case, or ``0``/``1``."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise Unconvertible


def _date(value: Any) -> date:
    if not isinstance(value, str) or not DATE_RE.fullmatch(value):
        raise Unconvertible
    return date.fromisoformat(value)


def _datetime(value: Any) -> datetime:
    if not isinstance(value, str) or not DATE_RE.match(value):
        raise Unconvertible
    return datetime.fromisoformat(value)


def _timestamp(value: Any) -> datetime:
    result = _datetime(value)
    if result.tzinfo is not None:
        result = result.astimezone(UTC).replace(tzinfo=None)
    return result


def _timestamptz(value: Any) -> datetime:
    result = _datetime(value)
    return result.replace(tzinfo=UTC) if result.tzinfo is None else result


def _time_of_day(value: Any) -> time:
    if not isinstance(value, str) or not value[:1].isdigit():
        raise Unconvertible
    return time.fromisoformat(value)


def _time(value: Any) -> time:
    result = _time_of_day(value)
    if result.tzinfo is not None:
        raise Unconvertible
    return result


def _timetz(value: Any) -> time:
    result = _time_of_day(value)
    return result.replace(tzinfo=UTC) if result.tzinfo is None else result


def uuid_value(value: Any) -> UUID:
    """A UUID from its string."""
    if not isinstance(value, str):
        raise Unconvertible
    return UUID(value)


def valid_text(value: str) -> str:
    """``value`` if every engine can store it (no lone surrogates), else ``Unconvertible``."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise Unconvertible("a string of valid Unicode characters") from None
    return value


def as_text(value: Any) -> str:
    """A string as it is, or a number's decimal text (an integral float without ``.0``)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        raise Unconvertible
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    raise Unconvertible


def _text(value: Any) -> str:
    return valid_text(as_text(value))


# Every kind but INTEGER, whose range depends on the column type.
_CONVERTERS: dict[Kind, Callable[[Any], Any]] = {
    Kind.NUMERIC: _numeric,
    Kind.FLOAT: _float,
    Kind.BOOLEAN: boolean,
    Kind.DATE: _date,
    Kind.TIMESTAMP: _timestamp,
    Kind.TIMESTAMPTZ: _timestamptz,
    Kind.TIME: _time,
    Kind.TIMETZ: _timetz,
    Kind.UUID: uuid_value,
    Kind.TEXT: _text,
    Kind.OTHER: _text,
}


def convert(kind: Kind, value: Any, data_type: str) -> Any:
    """The Python value to bind for a JSON filter value, or ``Unconvertible``."""
    try:
        if kind is Kind.INTEGER:
            return _integer(value, data_type)
        return _CONVERTERS[kind](value)
    except (ValueError, OverflowError) as error:
        raise Unconvertible from error
