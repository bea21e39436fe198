"""SQL Server values in the common result format: what each column type is selected as, and
the converters its Python values go through.

Row encoding (``adapters.datasources.common.encoding`` for the rest):

=======================================  ==========================================================
SQL Server type                          JSON value
=======================================  ==========================================================
tinyint, smallint, int, bigint           number
decimal, numeric, money, smallmoney      string with the exact digits (``"12.5000"``)
float / real                             number (``real`` as its shortest single-precision text)
bit                                      ``true`` / ``false``
char, varchar, nchar, nvarchar, (n)text  string
date / time                              ``"YYYY-MM-DD"`` / ``"HH:MM:SS[.ffffff]"``
datetime, datetime2, smalldatetime       RFC 3339, read as UTC: ``"2024-01-02T03:04:05Z"``
datetimeoffset                           RFC 3339 in UTC (converted on the server)
uniqueidentifier                         canonical lower-case string
binary, varbinary, image, rowversion     standard base64 string
xml, hierarchyid, sql_variant            their text form
geography, geometry                      well-known text (``POINT (1 2)``)
=======================================  ==========================================================
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import cast, func, literal_column
from sqlalchemy.dialects.mssql import CHAR, DATETIME2, NVARCHAR
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import ColumnElement

from adapters.datasources.common.encoding import Converter, float32, utc

UTC_TYPES = frozenset({"datetime", "datetime2", "smalldatetime", "datetimeoffset"})
TEXT_OUTPUT = {"xml": None, "hierarchyid": None, "sql_variant": 4000}
SPATIAL_TYPES = frozenset({"geography", "geometry"})


class _Method(ColumnElement[Any]):
    """``column.Method()``, SQL Server's call syntax for CLR types."""

    inherit_cache = True

    def __init__(self, column: ColumnElement[Any], method: str) -> None:
        self.column = column
        self.method = method


@compiles(_Method, "mssql")
def _compile_method(element: _Method, compiler: SQLCompiler, **kw: Any) -> str:
    return f"{compiler.process(element.column, **kw)}.{element.method}()"


def output(column: ColumnElement[Any], data_type: str) -> ColumnElement[Any]:
    if data_type == "uniqueidentifier":
        return func.lower(cast(column, CHAR(36)))
    if data_type == "datetimeoffset":
        return cast(func.switchoffset(column, literal_column("'+00:00'")), DATETIME2)
    if data_type in TEXT_OUTPUT:
        return cast(column, NVARCHAR(TEXT_OUTPUT[data_type]))
    if data_type in SPATIAL_TYPES:
        return _Method(column, "STAsText")
    return column


def converter(data_type: str) -> Converter | None:
    if data_type in UTC_TYPES:
        return utc
    if data_type == "real":
        return float32
    return None
