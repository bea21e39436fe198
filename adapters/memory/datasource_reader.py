"""An in-memory datasource: tables as Python rows, filters evaluated in plain Python.

Deterministic and keyed like the real engines (normalised table names, rows in insertion
order). Failures can be injected per stage for tests.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from application.errors import DatasourceQueryFailed, DatasourceUnavailable
from application.ports.datasource_reader import DatasourceReader, RowChunk
from domain.connection import Endpoint
from domain.schema import Column, Schema, Table, TableRead


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

    async def extract(
        self, endpoint: Endpoint, reads: Sequence[TableRead]
    ) -> AsyncIterator[RowChunk]:
        db = self._open(endpoint)
        for read in reads:
            if db.fail_query:
                raise DatasourceQueryFailed()
            names = sorted(c.name for c in read.columns)
            batch: list[bytes] = []
            for row in db.tables[read.result_key].rows:
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


def _selected(row: Mapping[str, Any], filters: Mapping[str, Mapping[str, Sequence[Any]]]) -> bool:
    return all(
        matches(op, values, row.get(name))
        for name, condition in filters.items()
        for op, values in condition.items()
    )
