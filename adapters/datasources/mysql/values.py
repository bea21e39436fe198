"""MySQL / MariaDB values in the common result format: the driver's decoders and what each
column type is selected as.

Row encoding (the common result format, as ``adapters.datasources.postgres.values``):

=================================  ==============================================================
MySQL / MariaDB type               JSON value
=================================  ==============================================================
tinyint, smallint, mediumint,      number (exact digits, unsigned included)
int, bigint, year, bit(n > 1)
tinyint(1) / bool / boolean,       ``true`` / ``false`` (MySQL's BOOLEAN: zero is false, any other
bit(1)                             value true)
decimal / numeric                  string with the exact digits (``"12.50"``)
double                             number, shortest round-trip
float                              number, shortest text of the single-precision value (``1.1``)
char, varchar, text types, enum,   string
set, uuid, inet4, inet6
date                               ``"YYYY-MM-DD"``
datetime, timestamp                RFC 3339 in UTC, ``"2024-01-02T03:04:05Z"``; fractions as 6
                                   digits when non-zero; ``datetime`` is read as UTC, ``timestamp``
                                   is converted by the server (session time zone UTC)
time                               ``"HH:MM:SS[.ffffff]"`` (MySQL's range, ``-838:59:59`` up)
binary, varbinary, blob types      standard base64 string
json                               embedded as JSON, the server's text copied verbatim
geometry types                     WKT text (``"POINT(1 2)"``)
zero dates (``0000-00-00``, a      ``null``
zero month or day)
NULL                               ``null``
=================================  ==============================================================
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
from pymysql.constants import FIELD_TYPE
from pymysql.converters import decoders, through
from sqlalchemy import func, literal
from sqlalchemy.sql.elements import ColumnElement

from adapters.datasources.common.encoding import float32
from adapters.datasources.common.sql_values import type_name

BOOLEAN_TYPES = frozenset({"tinyint(1)", "tinyint(1) unsigned", "bit(1)", "bool", "boolean"})
SPATIAL_TYPES = frozenset(
    {"geometry", "point", "linestring", "polygon", "multipoint", "multilinestring",
     "multipolygon", "geometrycollection", "geomcollection"}
)  # fmt: skip


def _date_text(text: str) -> str | None:
    return None if text[5:7] == "00" or text[8:10] == "00" else text


def _datetime_text(text: str) -> str | None:
    if text[5:7] == "00" or text[8:10] == "00":
        return None
    fraction = text[20:].ljust(6, "0")
    if fraction != "000000":
        return f"{text[:10]}T{text[11:19]}.{fraction}Z"
    return f"{text[:10]}T{text[11:19]}Z"


def _time_text(text: str) -> str:
    head, _, fraction = text.partition(".")
    return f"{head}.{fraction.ljust(6, '0')}" if fraction.strip("0") else head


# The connection's decoders: decimals and JSON as the server's text, dates and times as text in
# the common format (zero dates as None), bits as they come (``output`` selects them as numbers).
DECODERS: dict[int, Callable[[Any], Any]] = {
    **decoders,
    FIELD_TYPE.DECIMAL: through,
    FIELD_TYPE.NEWDECIMAL: through,
    FIELD_TYPE.DATE: _date_text,
    FIELD_TYPE.NEWDATE: _date_text,
    FIELD_TYPE.DATETIME: _datetime_text,
    FIELD_TYPE.TIMESTAMP: _datetime_text,
    FIELD_TYPE.TIME: _time_text,
    FIELD_TYPE.BIT: through,
    FIELD_TYPE.JSON: through,
}


def output(
    column: ColumnElement[Any], data_type: str
) -> tuple[ColumnElement[Any], Callable[[Any], Any] | None]:
    """What to select for a column, and the function its non-null values go through."""
    name = type_name(data_type)
    if data_type in BOOLEAN_TYPES:
        return column != 0, bool
    if name == "bit":
        return column + 0, None
    if name == "float":
        return column + literal(0.0), float32
    if name == "json":
        return column, msgspec.Raw
    if name in SPATIAL_TYPES:
        return func.ST_AsText(column), None
    return column, None
