"""Datasource readers for tests: the in-memory twin holding the reader contract's tables, a
name resolver answering from a table, and a reader that refuses every preparation."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from typing import Any

from adapters.memory.datasource_reader import InMemoryDatasourceReader, MemoryTable
from application.ports.datasource_reader import DatasourceReader, PreparedReads, RowChunk
from domain.connection import DatabaseType, Endpoint
from domain.errors import InvalidRequest
from domain.schema import Schema, TableRead
from tests.contracts.datasource_reader import PEOPLE, ContractTables

TABLES = ContractTables(people="people", empty="empty", id="id", name="name")
"""How the twin of ``contract_twin`` spells the contract's tables."""


def contract_endpoint(host: str) -> Endpoint:
    return Endpoint(
        type=DatabaseType.POSTGRESQL, host=host, port=5432, database_name="app",
        user_name="reader", password="secret",
    )  # fmt: skip


def contract_twin(host: str) -> InMemoryDatasourceReader:
    """The twin with the contract's tables in database ``app`` at ``host``."""
    twin = InMemoryDatasourceReader(chunk_rows=2)
    db = twin.database(host, "app")
    db.tables["people"] = MemoryTable(
        columns=[("id", "integer"), ("name", "text")],
        rows=[{"id": id_, "name": name} for id_, name in PEOPLE],
    )
    db.tables["empty"] = MemoryTable(columns=[("id", "integer")])
    return twin


class Resolver:
    """A name resolver answering from a table, recording what it was asked."""

    def __init__(self, answers: dict[str, list[str]]) -> None:
        self.answers = answers
        self.asked: list[str] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append(host)
        if host not in self.answers:
            raise OSError(f"cannot resolve {host}")
        return self.answers[host]


class RefusingReader(DatasourceReader):
    """Refuses every preparation at call time; any other call is a test failure."""

    def __init__(self) -> None:
        self.prepared = 0

    async def test(self, endpoint: Endpoint, timeout: float) -> None:
        raise AssertionError("test() was not expected")

    async def discover(self, endpoint: Endpoint, scope: Sequence[str]) -> Schema:
        raise AssertionError("discover() was not expected")

    def prepare(self, endpoint: Endpoint, reads: Sequence[TableRead]) -> PreparedReads[Any]:
        self.prepared += 1
        raise InvalidRequest("filter on 'people.id': operator 'eq' expects an integer")

    def stream(
        self, endpoint: Endpoint, prepared: PreparedReads[Any]
    ) -> AsyncGenerator[RowChunk, None]:
        raise AssertionError("stream() was not expected")
