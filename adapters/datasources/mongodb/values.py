"""MongoDB values: BSON values in the common result format, and filter values converted by the
field's BSON type as sampled by ``schema``.

BSON values in the result (otherwise as ``adapters.datasources.common.encoding``), through
``bson_value`` (msgspec's hook) and ``top_level``:

===================  ===========================================================================
BSON type            JSON value
===================  ===========================================================================
objectId             24-character hexadecimal string
decimal (128)        string with the exact digits (``"1.50"``, ``"NaN"``)
int, long            number
double               number; NaN/±Infinity at the top level as ``"NaN"``/``"Infinity"``/...
date                 RFC 3339 in UTC with ``Z`` (milliseconds as 6 digits when non-zero); dates
                     outside years 1-9999 as their milliseconds since the epoch (number)
binData              standard base64 string; subtype 4 (UUID) as the canonical UUID string
object, array        embedded JSON (nested values converted the same way)
timestamp            ``{"t": seconds, "i": increment}``
regex                ``{"pattern": ..., "options": ...}``
javascript, symbol   string
minKey, maxKey       ``"MinKey"``, ``"MaxKey"``
===================  ===========================================================================

Filter values: one that does not convert raises ``Unconvertible``; ``statements`` reports it as
``InvalidRequest`` naming ``EXPECTED[type]``. Booleans, UUIDs, strings and decimal numbers are read
by the SQL engines' parsers (``common.sql_values``), which raise the same ``Unconvertible``:

============================  ======================================================================
field type                    accepted JSON values → query value
============================  ======================================================================
objectId                      24 hexadecimal characters → ``ObjectId``
date                          ISO 8601 date or date-time → ``datetime`` in UTC (no offset: UTC);
                              a date-only upper bound of ``between`` means the end of that day
int, long, double             numbers and numeric strings → ``int`` (integral) or ``float``
decimal                       numbers and numeric strings → ``Decimal128``
bool                          ``true``/``false``, ``"true"``/``"false"`` (any case), ``0``/``1``
string                        strings as they are; numbers as their decimal text
uuid                          UUID strings → ``UUID`` (stored as binary subtype 4)
anything else                 the JSON value as it is (mixed types, objects, arrays, binary...)
============================  ======================================================================
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from bson import Code, Decimal128, Int64, MaxKey, MinKey, ObjectId, Regex, Timestamp
from bson.datetime_ms import DatetimeMS
from bson.dbref import DBRef

from adapters.datasources.common.sql_values import (
    DATE_RE,
    DECIMAL_RE,
    INTEGER_RE,
    Unconvertible,
    as_text,
    boolean,
    numeric_text,
    uuid_value,
)

__all__ = ["CONVERTERS", "EXPECTED", "Unconvertible", "bson_value", "top_level"]

_OBJECT_ID_RE = re.compile(r"[0-9a-fA-F]{24}", re.ASCII)


def bson_value(value: Any) -> Any:
    """msgspec's hook for the BSON types it does not encode by itself."""
    match value:
        case ObjectId() | Decimal128() | Code():
            return str(value)
        case Int64():
            return int(value)
        case bytes():  # Binary of a subtype other than 0 and 4
            return bytes(value)
        case DatetimeMS():
            return int(value)
        case Timestamp():
            return {"t": value.time, "i": value.inc}
        case Regex():
            options = value.flags_string()  # type: ignore[attr-defined]  # missing from the stubs
            return {"pattern": str(value.pattern), "options": options}
        case DBRef():
            return value.as_doc()
        case MinKey():
            return "MinKey"
        case MaxKey():
            return "MaxKey"
    raise TypeError(f"unsupported BSON value of type {type(value).__name__}")


def top_level(value: Any) -> Any:
    """A top-level field value as the result shows it (non-finite doubles as text)."""
    if value.__class__ is float and not math.isfinite(value):
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    return value


EXPECTED = {
    "objectId": "an ObjectId (24 hexadecimal characters)",
    "date": "an ISO 8601 date or timestamp",
    "int": "a number",
    "long": "a number",
    "double": "a number",
    "decimal": "a decimal number",
    "bool": "a boolean",
    "string": "a string",
    "uuid": "a UUID",
}


def _object_id(value: Any) -> ObjectId:
    if isinstance(value, str) and _OBJECT_ID_RE.fullmatch(value):
        return ObjectId(value)
    raise Unconvertible


def _date(value: Any) -> datetime:
    if not isinstance(value, str) or not DATE_RE.match(value):
        raise Unconvertible
    result = datetime.fromisoformat(value)
    return result.replace(tzinfo=UTC) if result.tzinfo is None else result.astimezone(UTC)


def _number(value: Any) -> int | float:
    if isinstance(value, bool):
        raise Unconvertible
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else value
    if isinstance(value, str):
        if INTEGER_RE.fullmatch(value):
            return int(value)
        if DECIMAL_RE.fullmatch(value):
            result = float(value)
            if result in (float("inf"), float("-inf")):
                raise Unconvertible
            return result
    raise Unconvertible


def _decimal(value: Any) -> Decimal128:
    text = numeric_text(value)
    try:
        return Decimal128(Decimal(text))
    except (InvalidOperation, ValueError) as error:
        raise Unconvertible from error


CONVERTERS: dict[str, Callable[[Any], Any]] = {
    "objectId": _object_id,
    "date": _date,
    "int": _number,
    "long": _number,
    "double": _number,
    "decimal": _decimal,
    "bool": boolean,
    "string": as_text,
    "uuid": uuid_value,
}
