"""One contract for every ``DatasourceReader``: the in-memory twin and the wrappers (unit suite),
each real engine (integration suite).

A subclass provides four fixtures: ``reader``; ``endpoint``, a datasource holding the contract's
two tables (``PEOPLE`` and a table without rows) under the names ``tables`` gives; and
``unreachable``, an endpoint of the same type where nothing answers.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from application.errors import DatasourceError
from application.ports.datasource_reader import DatasourceReader, PreparedReads, RowChunk
from domain.connection import Endpoint
from domain.errors import InvalidRequest
from domain.schema import Column, Table, TableRead

PEOPLE: tuple[tuple[int, str], ...] = ((1, "ada"), (2, "bob"), (3, "cy"))
"""The rows of the contract's people table: an integer id and a text name."""


@dataclass(frozen=True, slots=True)
class ContractTables:
    """How one datasource spells the contract's tables and columns."""

    people: str
    """The key of the table holding ``PEOPLE``."""
    empty: str
    """The key of a table without rows."""
    id: str
    """The integer column of the people table."""
    name: str
    """The text column of the people table."""

    def row(self, id_: int, name: str) -> dict[str, Any]:
        return {self.id: id_, self.name: name}


def _rows(chunks: Sequence[RowChunk]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for chunk in chunks:
        assert chunk.data and chunk.rows > 0
        parsed = json.loads(b"[" + chunk.data + b"]")
        assert len(parsed) == chunk.rows
        rows.extend(parsed)
    return rows


async def _collect(stream: AsyncIterator[RowChunk]) -> list[RowChunk]:
    return [chunk async for chunk in stream]


class DatasourceReaderContract:
    """The behaviour every reader shares, whatever it reads."""

    async def _people(
        self, reader: DatasourceReader, endpoint: Endpoint, tables: ContractTables
    ) -> Table:
        return (await reader.discover(endpoint, ())).tables[tables.people]

    def _read(
        self,
        table: Table,
        key: str,
        columns: Sequence[str],
        filters: dict[str, dict[str, tuple[Any, ...]]] | None = None,
    ) -> TableRead:
        picked = tuple(c for c in table.columns if c.name in columns)
        assert len(picked) == len(columns), f"{columns} not all in {table.columns}"
        return TableRead(key, table, picked, filters or {})

    # --- test and discover ---------------------------------------------------------------------

    async def test_test_succeeds_on_the_datasource(
        self, reader: DatasourceReader, endpoint: Endpoint
    ) -> None:
        await reader.test(endpoint, 10)

    async def test_test_fails_at_the_connect_stage_where_nothing_answers(
        self, reader: DatasourceReader, unreachable: Endpoint
    ) -> None:
        with pytest.raises(DatasourceError) as caught:
            await reader.test(unreachable, 5)
        assert caught.value.stage == "connect"

    async def test_discover_returns_the_tables_under_their_normalised_keys(
        self, reader: DatasourceReader, endpoint: Endpoint, tables: ContractTables
    ) -> None:
        schema = await reader.discover(endpoint, ())
        assert {tables.people, tables.empty} <= set(schema.tables)
        names = {column.name for column in schema.tables[tables.people].columns}
        assert {tables.id, tables.name} <= names

    # --- prepare -------------------------------------------------------------------------------

    async def test_prepare_refuses_a_filter_value_that_does_not_convert_before_any_io(
        self,
        reader: DatasourceReader,
        endpoint: Endpoint,
        unreachable: Endpoint,
        tables: ContractTables,
    ) -> None:
        people = await self._people(reader, endpoint, tables)
        bad = {tables.id: {"eq": ("not a number",)}}
        read = self._read(people, tables.people, [tables.id], bad)
        with pytest.raises(InvalidRequest) as caught:
            reader.prepare(unreachable, [read])
        assert caught.value.code == "FET-0401"
        assert tables.id in caught.value.message

    async def test_prepare_dials_nothing(
        self,
        reader: DatasourceReader,
        endpoint: Endpoint,
        unreachable: Endpoint,
        tables: ContractTables,
    ) -> None:
        people = await self._people(reader, endpoint, tables)
        read = self._read(people, tables.people, [tables.id], {tables.name: {"eq": ("bob",)}})
        prepared = reader.prepare(unreachable, [read])
        assert isinstance(prepared, PreparedReads)
        assert len(prepared.steps) == 1

    async def test_reads_without_columns_prepare_nothing_and_stream_without_connecting(
        self,
        reader: DatasourceReader,
        endpoint: Endpoint,
        unreachable: Endpoint,
        tables: ContractTables,
    ) -> None:
        people = await self._people(reader, endpoint, tables)
        prepared = reader.prepare(unreachable, [TableRead(tables.people, people, ())])
        assert prepared.steps == ()
        assert await _collect(reader.stream(unreachable, prepared)) == []

    # --- stream --------------------------------------------------------------------------------

    async def test_stream_does_nothing_until_iterated_then_fails_to_connect(
        self,
        reader: DatasourceReader,
        endpoint: Endpoint,
        unreachable: Endpoint,
        tables: ContractTables,
    ) -> None:
        people = await self._people(reader, endpoint, tables)
        read = self._read(people, tables.people, [tables.id])
        stream = reader.stream(unreachable, reader.prepare(unreachable, [read]))
        with pytest.raises(DatasourceError) as caught:
            await anext(stream)
        assert caught.value.stage == "connect"

    async def test_stream_yields_every_row_in_the_result_format(
        self, reader: DatasourceReader, endpoint: Endpoint, tables: ContractTables
    ) -> None:
        people = await self._people(reader, endpoint, tables)
        read = self._read(people, tables.people, [tables.id, tables.name])
        chunks = await _collect(reader.stream(endpoint, reader.prepare(endpoint, [read])))
        assert {chunk.result_key for chunk in chunks} == {tables.people}
        rows = sorted(_rows(chunks), key=lambda row: row[tables.id])
        assert rows == [tables.row(id_, name) for id_, name in PEOPLE]
        for row in rows:
            assert list(row) == sorted(row)

    async def test_stream_reads_in_order_with_filter_values_converted_by_column_type(
        self, reader: DatasourceReader, endpoint: Endpoint, tables: ContractTables
    ) -> None:
        people = await self._people(reader, endpoint, tables)
        reads = [
            self._read(people, "by_name", [tables.id], {tables.name: {"eq": ("bob",)}}),
            self._read(people, "by_id", [tables.name], {tables.id: {"gte": ("2",)}}),
        ]
        chunks = await _collect(reader.stream(endpoint, reader.prepare(endpoint, reads)))
        keys = [chunk.result_key for chunk in chunks]
        assert keys == sorted(keys, key=["by_name", "by_id"].index)
        by_key = {key: _rows([c for c in chunks if c.result_key == key]) for key in set(keys)}
        assert by_key["by_name"] == [{tables.id: 2}]
        assert sorted(row[tables.name] for row in by_key["by_id"]) == ["bob", "cy"]

    async def test_tables_without_rows_yield_nothing(
        self, reader: DatasourceReader, endpoint: Endpoint, tables: ContractTables
    ) -> None:
        empty = (await reader.discover(endpoint, ())).tables[tables.empty]
        # MongoDB finds no fields in an empty collection: read one anyway.
        columns = empty.columns or (Column(tables.id, "int"),)
        read = TableRead(tables.empty, empty, columns)
        assert await _collect(reader.stream(endpoint, reader.prepare(endpoint, [read]))) == []
