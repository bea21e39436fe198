"""MongoDB filter values, converted by the field's BSON type as sampled by ``mongo_schema``.

A value that does not convert raises ``Unconvertible``; ``mongo_filters`` reports it as
``InvalidRequest`` naming ``EXPECTED[type]``:

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

import re
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any
from uuid import UUID

from bson import Decimal128, ObjectId

_OBJECT_ID_RE = re.compile(r"[0-9a-fA-F]{24}", re.ASCII)
_INTEGER_RE = re.compile(r"[+-]?[0-9]+", re.ASCII)
_DECIMAL_RE = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)
DATE_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", re.ASCII)

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


class Unconvertible(Exception):
    pass


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
        if _INTEGER_RE.fullmatch(value):
            return int(value)
        if _DECIMAL_RE.fullmatch(value):
            result = float(value)
            if result in (float("inf"), float("-inf")):
                raise Unconvertible
            return result
    raise Unconvertible


def _decimal(value: Any) -> Decimal128:
    if isinstance(value, bool):
        raise Unconvertible
    if isinstance(value, int | float):
        text = repr(value)
    elif isinstance(value, str) and _DECIMAL_RE.fullmatch(value):
        text = value
    else:
        raise Unconvertible
    try:
        return Decimal128(Decimal(text))
    except (InvalidOperation, ValueError) as error:
        raise Unconvertible from error


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise Unconvertible


def _string(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        raise Unconvertible
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    raise Unconvertible


def _uuid(value: Any) -> UUID:
    if not isinstance(value, str):
        raise Unconvertible
    return UUID(value)


CONVERTERS: dict[str, Callable[[Any], Any]] = {
    "objectId": _object_id,
    "date": _date,
    "int": _number,
    "long": _number,
    "double": _number,
    "decimal": _decimal,
    "bool": _bool,
    "string": _string,
    "uuid": _uuid,
}
