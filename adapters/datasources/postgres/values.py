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
from typing import Any

import asyncpg
import msgspec
from sqlalchemy import cast
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
ALL_CODEC_TYPES = {"double precision", "json"}
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


def _float_or_text(text: str) -> float | str:
    value = float(text)
    return value if math.isfinite(value) else text


async def register_codecs(connection: asyncpg.Connection, types: set[str]) -> None:
    """Decoders for the column types read in this session: floats from their text (NaN and the
    infinities stay text), JSON as the server's text."""
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
