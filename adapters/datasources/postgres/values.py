"""PostgreSQL values in the common result format: what each column type is selected as, and the
decoders the extraction session registers.

Row encoding (one JSON object per row, keys sorted by code point = UTF-8 byte order; msgspec
through a struct type built once per table, ``adapters.datasources.common.encoding``):

=============================  ===================================================================
PostgreSQL type                JSON value
=============================  ===================================================================
smallint, integer, bigint      number (exact digits)
numeric / decimal              string with the exact digits (``"12.50"``, ``"NaN"``)
real, double precision         number, shortest round-trip; NaN/±Infinity as ``"NaN"``,
                               ``"Infinity"``, ``"-Infinity"``
boolean                        ``true`` / ``false``
text, varchar, char, name      string
date                           ``"YYYY-MM-DD"``
timestamp with time zone       RFC 3339 in UTC, ``"2024-01-02T03:04:05Z"``; fractions as 6 digits
                               when non-zero (``"...05.120000Z"``)
timestamp without time zone    read as UTC, same form as above
time [with time zone]          ``"HH:MM:SS[.ffffff]"`` [+ offset]
uuid                           canonical lower-case string
bytea                          standard base64 string
json, jsonb                    embedded as JSON, server text copied verbatim (never parsed)
arrays (of the types above)    JSON arrays (nested for several dimensions); timestamp arrays as
                               UTC; arrays of any other element type as arrays of strings
interval                       ISO 8601 duration string (``"P1Y2M3DT4H5M6.5S"``), exact months
anything else                  PostgreSQL's text form (money, inet, ranges, enums, geometric,
                               bit strings, xml, user types, ...)
NULL                           ``null``
=============================  ===================================================================

Limits of the driver's date/time mapping: ``±infinity`` timestamps come out as
``9999-12-31T23:59:59.999999`` / ``0001-01-01T00:00:00`` (no ``Z``), ``infinity`` dates as
``9999-12-31``; BC dates and ``24:00:00`` times cannot be read and fail the query.

Strings are plain JSON escapes (msgspec): non-ASCII is raw UTF-8, ``<>&`` are not escaped.
"""

from __future__ import annotations

import math
import typing
from datetime import datetime
from typing import Any

import asyncpg
import msgspec
from sqlalchemy import case, cast, func, literal_column
from sqlalchemy.dialects.postgresql import ARRAY, TEXT, TIMESTAMP
from sqlalchemy.sql.elements import ColumnElement

# Types whose asyncpg value msgspec encodes as documented above, as they come. Everything else
# is cast on the server: numeric and uuid to text (same JSON, far less Python work per value
# than Decimal/UUID objects, and numeric keeps its exact digits without exponents), timestamps
# to timestamptz (the transaction runs in UTC), anything else to its text.
# fmt: off
_NATIVE = frozenset({
    "smallint", "integer", "bigint", "real", "double precision", "boolean", "text",
    "character varying", "character", "name", "date", "timestamp with time zone",
    "time without time zone", "time with time zone", "bytea", "json", "jsonb",
    "_int2", "_int4", "_int8", "_float4", "_float8", "_bool", "_text", "_varchar", "_bpchar",
    "_name", "_date", "_timestamptz", "_time", "_timetz", "_bytea", "_json", "_jsonb",
})
# fmt: on

_FLOAT_TYPES = frozenset({"real", "double precision", "_float4", "_float8"})
_JSON_TYPES = frozenset({"json", "jsonb", "_json", "_jsonb"})
_TIMESTAMP_TYPES = frozenset({
    "timestamp with time zone", "timestamp without time zone", "_timestamptz", "_timestamp",
})  # fmt: skip
ALL_CODEC_TYPES = {"double precision", "json", "timestamp with time zone"}
"""Column types that make ``register_codecs`` register every decoder it has."""


def output(column: ColumnElement[Any], data_type: str) -> ColumnElement[Any]:
    """What a column of ``data_type`` is selected as."""
    if data_type in _NATIVE:
        return column
    if data_type == "timestamp without time zone":
        return cast(column, TIMESTAMP(timezone=True))
    if data_type == "_timestamp":
        return cast(column, ARRAY(TIMESTAMP(timezone=True)))
    if data_type.startswith("_"):
        return cast(column, ARRAY(TEXT))
    return cast(column, TEXT)


# Types whose JSON the server builds with exactly the bytes above (``server_output``): as they
# come (row_to_json escapes strings as msgspec does: ``\b \f \n \r \t \" \\``, other
# control characters as lower-case ``\u00xx``, everything else raw UTF-8; ``character`` keeps
# its padding; jsonb is embedded as its text form), cast to text as above, or rebuilt by an
# expression (dates, timestamps, bytea). Floats (PostgreSQL writes ``1e+100``), ``json`` (its
# verbatim text may hold raw control characters), times (trimmed fractions) and arrays are
# encoded in Python.
# fmt: off
_SERVER_AS_IS = frozenset({
    "smallint", "integer", "bigint", "boolean", "text", "character varying", "character", "name",
    "jsonb",
})
# fmt: on
_PYTHON_ONLY = _FLOAT_TYPES | {"json", "time without time zone", "time with time zone"}
_INFINITY = {"date": ("9999-12-31", "0001-01-01"),
             "ts": ("9999-12-31T23:59:59.999999", "0001-01-01T00:00:00")}  # fmt: skip
_IN_RANGE = {"date": ("0001-01-01", "9999-12-31"),
             "ts": ("0001-01-01 00:00:00+00", "9999-12-31 23:59:59.999999+00")}  # fmt: skip


OUTSIDE_PYTHON_RANGE = "outside the range Python can read"
"""In the server's error for a date or timestamp the Python path could not read either."""


def _sql(text: str) -> ColumnElement[Any]:
    return literal_column(text)


def _calendar(column: ColumnElement[Any], kind: str, formatted: ColumnElement[Any]) -> Any:
    """``formatted`` for values asyncpg can decode; what the Python path writes for ±infinity
    (asyncpg's ``max``/``min``); an error (as the Python path fails) for any other value."""
    sql_type = "date" if kind == "date" else "timestamptz"
    high, low = _INFINITY[kind]
    first, last = _IN_RANGE[kind]
    outside = cast(
        cast(_sql(f"'{OUTSIDE_PYTHON_RANGE}: '").op("||")(cast(column, TEXT)), TEXT).op("::")(
            _sql(sql_type)
        ),
        TEXT,
    )
    return case(
        (column == _sql(f"'infinity'::{sql_type}"), _sql(f"'{high}'")),
        (column == _sql(f"'-infinity'::{sql_type}"), _sql(f"'{low}'")),
        (
            column.between(_sql(f"'{first}'::{sql_type}"), _sql(f"'{last}'::{sql_type}")),
            formatted,
        ),
        else_=outside,
    )


def server_output(column: ColumnElement[Any], data_type: str) -> ColumnElement[Any] | None:
    """What a column of ``data_type`` is selected as when the server builds the row's JSON
    (``row_to_json``) with the same bytes as the Python path; None when it cannot."""
    if data_type in _SERVER_AS_IS:
        return column
    if data_type in _PYTHON_ONLY or data_type.startswith("_"):
        return None
    if data_type == "date":
        return typing.cast(
            ColumnElement[Any],
            _calendar(column, "date", func.to_char(column, _sql("'YYYY-MM-DD'"))),
        )
    if data_type in ("timestamp with time zone", "timestamp without time zone"):
        moment = cast(column, TIMESTAMP(timezone=True))
        text = func.to_char(moment, _sql('\'YYYY-MM-DD"T"HH24:MI:SS.US"Z"\''))
        formatted = func.replace(text, _sql("'.000000Z'"), _sql("'Z'"))
        return typing.cast(ColumnElement[Any], _calendar(moment, "ts", formatted))
    if data_type == "bytea":
        return func.translate(func.encode(column, _sql("'base64'")), _sql("E'\\n'"), _sql("''"))
    return cast(column, TEXT)


def _float_or_text(text: str) -> float | str:
    value = float(text)
    return value if math.isfinite(value) else text


# What asyncpg's own (binary) decoder gives for the infinite timestamps.
_INFINITE_TIMESTAMPS = {"infinity": datetime.max, "-infinity": datetime.min}


def _timestamptz(text: str) -> datetime:
    """A ``timestamptz`` from its ISO text in a UTC session (``2024-01-02 03:04:05.12+00``):
    the same value as asyncpg's binary decoder, at less than half its cost (that one adds a
    ``timedelta`` to an epoch for every value). BC and five-digit years fail as there."""
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        if text in _INFINITE_TIMESTAMPS:
            return _INFINITE_TIMESTAMPS[text]
        raise


def _timestamptz_text(value: datetime | str) -> str:
    return value if isinstance(value, str) else value.isoformat()


async def register_codecs(connection: asyncpg.Connection, types: set[str]) -> None:
    """Decoders for the column types read in this session: floats from their text (NaN and the
    infinities stay text), JSON as the server's text, timestamps (selected as ``timestamptz``)
    from their text, which needs the session's ``TimeZone`` at UTC and ``DateStyle`` at ISO."""
    if types & _FLOAT_TYPES:
        for name in ("float4", "float8"):
            await connection.set_type_codec(
                name, schema="pg_catalog", encoder=repr, decoder=_float_or_text, format="text"
            )
    if types & _JSON_TYPES:
        for name in ("json", "jsonb"):
            await connection.set_type_codec(
                name, schema="pg_catalog", encoder=str, decoder=msgspec.Raw, format="text"
            )
    if types & _TIMESTAMP_TYPES:
        await connection.set_type_codec(
            "timestamptz",
            schema="pg_catalog",
            encoder=_timestamptz_text,
            decoder=_timestamptz,
            format="text",
        )
