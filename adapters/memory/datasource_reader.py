"""An in-memory datasource: tables as Python rows, filters evaluated in plain Python.

Deterministic and keyed like the real engines (normalised table names, rows in insertion
order). ``prepare`` checks filters as the SQL engines do: the field must be a column, ``null``
only in ``eq``/``ne``/``in``/``nin``, and every value is converted by the column's type with the
SQL engines' rules (``adapters.datasources.common.sql_values``); the rows are then matched
against the converted values. Failures can be injected per stage for tests.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from adapters.datasources.common.sql_values import EXPECTED, Unconvertible, column_kind, convert
from application.errors import DatasourceQueryFailed, DatasourceUnavailable
from application.ports.datasource_reader import DatasourceReader, PreparedReads, RowChunk
from domain.connection import Endpoint
from domain.errors import InvalidRequest
from domain.request import OPERATORS
from domain.schema import Column, Schema, Table, TableRead

_NULL_OPS = frozenset({"eq", "in", "ne", "nin"})


def matches(op: str, values: Sequence[Any], actual: Any) -> bool:
    """The meaning of one filter operator, evaluated in Python with SQL's null rules:
    ``null`` in ``eq``/``in`` also matches NULL, in ``ne``/``nin`` excludes it, and every
    other comparison with NULL is false."""
    if op in ("eq", "in"):
        return actual in values if actual is not None else None in values
    if actual is None:
        return False
    if op == "ne":
        return all(actual != v for v in values if v is not None)
    if op == "nin":
        return actual not in values
    if op == "gt":
        return bool(actual > values[0])
    if op == "gte":
        return bool(actual >= values[0])
    if op == "lt":
        return bool(actual < values[0])
    if op == "lte":
        return bool(actual <= values[0])
    if op == "between":
        return bool(values[0] <= actual <= values[1])
    if op == "like":
        return _like(str(values[0]), str(actual))
    raise ValueError(f"unknown operator {op}")


def _like(pattern: str, text: str) -> bool:
    import re

    regex = "".join(".*" if ch == "%" else "." if ch == "_" else re.escape(ch) for ch in pattern)
    return re.fullmatch(regex, text, flags=re.DOTALL) is not None


@dataclass
class MemoryTable:
    columns: Sequence[tuple[str, str]]
    rows: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class MemoryDatabase:
    tables: dict[str, MemoryTable] = field(default_factory=dict)
    fail_connect: bool = False
    fail_query: bool = False


class InMemoryDatasourceReader(DatasourceReader):
    """Databases keyed by ``(host, database_name)``."""

    def __init__(self, chunk_rows: int = 1000) -> None:
        self.databases: dict[tuple[str, str], MemoryDatabase] = {}
        self.chunk_rows = chunk_rows

    def database(self, host: str, name: str) -> MemoryDatabase:
        return self.databases.setdefault((host, name), MemoryDatabase())

    def _open(self, endpoint: Endpoint) -> MemoryDatabase:
        db = self.databases.get((endpoint.host, endpoint.database_name))
        if db is None or db.fail_connect:
            raise DatasourceUnavailable("failed to connect to datasource")
        return db

    async def test(self, endpoint: Endpoint, timeout: float) -> None:
        self._open(endpoint)

    async def discover(self, endpoint: Endpoint, scope: Sequence[str]) -> Schema:
        db = self._open(endpoint)
        return Schema(
            tables={
                name: Table(
                    schema=None,
                    name=name,
                    columns=tuple(Column(c, t) for c, t in table.columns),
                )
                for name, table in db.tables.items()
            }
        )

    def prepare(self, endpoint: Endpoint, reads: Sequence[TableRead]) -> PreparedReads[TableRead]:
        """The reads that ask for columns, their filter values converted; ``InvalidRequest``
        for a filter that does not fit."""
        database = endpoint.database_name
        return PreparedReads(tuple(_checked(read, database) for read in reads if read.columns))

    async def stream(
        self, endpoint: Endpoint, prepared: PreparedReads[TableRead]
    ) -> AsyncGenerator[RowChunk, None]:
        if not prepared.steps:
            return
        db = self._open(endpoint)
        for read in prepared.steps:
            table = db.tables.get(read.table.name)
            if db.fail_query or table is None:
                raise DatasourceQueryFailed()
            names = sorted(c.name for c in read.columns)
            batch: list[bytes] = []
            for row in table.rows:
                if not _selected(row, read.filters):
                    continue
                batch.append(
                    json.dumps({n: row.get(n) for n in names}, separators=(",", ":")).encode()
                )
                if len(batch) == self.chunk_rows:
                    yield RowChunk(read.result_key, b",".join(batch), len(batch))
                    batch = []
            if batch:
                yield RowChunk(read.result_key, b",".join(batch), len(batch))


def _shown(value: Any) -> str:
    text = repr(value) if not isinstance(value, str) else f"'{value}'"
    return text if len(text) <= 80 else text[:77] + "..."


def _converted(op: str, values: Sequence[Any], data_type: str, where: str) -> tuple[Any, ...]:
    if op not in OPERATORS:
        raise InvalidRequest(
            f"filter on {where}: unknown operator '{op}' (expected one of {', '.join(OPERATORS)})"
        )
    if op not in _NULL_OPS and any(v is None for v in values):
        raise InvalidRequest(
            f"filter on {where}: operator '{op}' does not accept null (only eq, ne, in and nin do)"
        )
    if op == "like":
        return tuple(values)
    kind = column_kind(data_type)
    converted: list[Any] = []
    for value in values:
        try:
            converted.append(None if value is None else convert(kind, value, data_type))
        except Unconvertible as error:
            expected = error.expected or EXPECTED[kind]
            raise InvalidRequest(
                f"filter on {where}: operator '{op}' expects {expected} for column type "
                f"'{data_type}', got {_shown(value)}"
            ) from None
    return tuple(converted)


def _checked(read: TableRead, database: str) -> TableRead:
    filters: dict[str, dict[str, tuple[Any, ...]]] = {}
    for name, condition in read.filters.items():
        where = f"'{read.result_key}.{name}' of database '{database}'"
        column = read.table.column(name)
        if column is None:
            raise InvalidRequest(f"filter on {where}: the field is not a column of the table")
        filters[name] = {
            op: _converted(op, values, column.data_type, where)
            for op, values in condition.items()
            if values
        }
    return replace(read, filters=filters)


def _selected(row: Mapping[str, Any], filters: Mapping[str, Mapping[str, Sequence[Any]]]) -> bool:
    return all(
        matches(op, values, row.get(name))
        for name, condition in filters.items()
        for op, values in condition.items()
    )
