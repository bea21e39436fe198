"""Oracle values in the common result format: type names, what each type is selected as, and
the converters its Python values go through.

Row encoding (``adapters.datasources.common.encoding`` for the rest):

====================================  =============================================================
Oracle type                           JSON value
====================================  =============================================================
NUMBER(p, 0), INTEGER                 number (exact digits)
NUMBER, NUMBER(p, s>0), FLOAT         string with the exact digits (``"12.5"``: Oracle keeps no
                                      trailing zeros)
BINARY_FLOAT, BINARY_DOUBLE           number (BINARY_FLOAT as its shortest single-precision text);
                                      NaN/±Infinity as ``"NaN"``/``"Infinity"``/``"-Infinity"``
VARCHAR2, NVARCHAR2, CHAR, NCHAR,     string (CHAR blank-padded as stored)
CLOB, NCLOB, LONG, ROWID
DATE, TIMESTAMP                       RFC 3339, read as UTC: ``"2024-01-02T03:04:05Z"``
TIMESTAMP WITH [LOCAL] TIME ZONE      RFC 3339 in UTC (converted on the server)
INTERVAL DAY TO SECOND                ISO 8601 duration (``"P1DT2H"``)
INTERVAL YEAR TO MONTH                ISO 8601 duration (``"P1Y2M"``)
RAW, BLOB, LONG RAW                   standard base64 string
BOOLEAN (23ai), JSON (21c)            ``true``/``false``; embedded JSON
====================================  =============================================================
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

import oracledb
from sqlalchemy import func
from sqlalchemy.sql.elements import ColumnElement

from adapters.datasources.common.encoding import Converter, finite_float, float32, iso_duration
from adapters.datasources.common.encoding import utc as utc_datetime

TZ_TYPES = ("timestamp with time zone", "timestamp with local time zone")
LOB_TEXT = frozenset({"clob", "nclob"})
_PARAMS_RE = re.compile(r"\([^)]*\)")


def column_type(data_type: str, precision: int | None, scale: int | None) -> str:
    """The type as Oracle writes it, lower-cased: ``number(10,0)``, ``number(*,0)``,
    ``varchar2``, ``timestamp(6) with time zone``..."""
    data_type = data_type.lower()
    if data_type == "number" and (precision is not None or scale is not None):
        digits = "*" if precision is None else str(precision)
        return f"number({digits},{scale or 0})"
    return data_type


def base_type(data_type: str) -> str:
    return " ".join(_PARAMS_RE.sub("", data_type).split())


def output(column: ColumnElement[Any], data_type: str) -> ColumnElement[Any]:
    if base_type(data_type) in TZ_TYPES:
        return func.sys_extract_utc(column)
    return column


def _interval_ym(value: Any) -> str:
    years, months = value.years, value.months
    sign = "-" if years < 0 or months < 0 else ""
    return f"{sign}P{abs(years)}Y{abs(months)}M"


def converter(data_type: str) -> Converter | None:
    base = base_type(data_type)
    if base in ("date", "timestamp", *TZ_TYPES):
        return utc_datetime
    if base == "binary_float":
        return float32
    if base == "binary_double":
        return finite_float
    if base == "interval year to month":
        return _interval_ym
    if base == "interval day to second":
        return iso_duration
    return None


def output_type_handler(cursor: Any, metadata: Any) -> Any:
    """NUMBER with a scale as Decimal (exact digits); integers stay int."""
    if metadata.type_code is oracledb.DB_TYPE_NUMBER and not (
        metadata.scale == 0 and (metadata.precision or 0) > 0
    ):
        return cursor.var(Decimal, arraysize=cursor.arraysize)
    return None
