"""The datasource reader contract on the in-memory twin, and on the wrappers (host guard, engine
registry) around it; and what a wrapper owes the reader it wraps."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Sequence
from typing import Any

import pytest

from adapters.datasources.registry import EngineRegistry
from adapters.memory.datasource_reader import InMemoryDatasourceReader, MemoryTable
from adapters.security.guarded_reader import GuardedDatasourceReader
from adapters.security.host_guard import NetworkHostGuard
from application.ports.datasource_reader import DatasourceReader, PreparedReads, RowChunk
from domain.connection import DatabaseType, Endpoint
from domain.errors import InvalidRequest
from domain.schema import Schema, Table, TableRead
from tests.contracts.datasource_reader import PEOPLE, ContractTables, DatasourceReaderContract

TABLES = ContractTables(people="people", empty="empty", id="id", name="name")


def _endpoint(host: str) -> Endpoint:
    return Endpoint(
        type=DatabaseType.POSTGRESQL, host=host, port=5432, database_name="app",
        user_name="reader", password="secret",
    )  # fmt: skip


def _twin(host: str) -> InMemoryDatasourceReader:
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


class TestInMemoryDatasourceReader(DatasourceReaderContract):
    @pytest.fixture
    def reader(self) -> DatasourceReader:
        return _twin("db.local")

    @pytest.fixture
    def endpoint(self) -> Endpoint:
        return _endpoint("db.local")

    @pytest.fixture
    def unreachable(self) -> Endpoint:
        return _endpoint("nowhere.local")

    @pytest.fixture
    def tables(self) -> ContractTables:
        return TABLES


class TestGuardedDatasourceReader(DatasourceReaderContract):
    """The twin answers only at the addresses the guard pins, so every call that reaches it
    went through the guard."""

    @pytest.fixture
    def reader(self) -> DatasourceReader:
        resolver = Resolver(
            {"db.example.com": ["93.184.216.34"], "gone.example.com": ["93.184.216.35"]}
        )
        return GuardedDatasourceReader(_twin("93.184.216.34"), NetworkHostGuard(resolver))

    @pytest.fixture
    def endpoint(self) -> Endpoint:
        return _endpoint("db.example.com")

    @pytest.fixture
    def unreachable(self) -> Endpoint:
        return _endpoint("gone.example.com")

    @pytest.fixture
    def tables(self) -> ContractTables:
        return TABLES


class TestEngineRegistry(DatasourceReaderContract):
    @pytest.fixture
    def reader(self) -> DatasourceReader:
        twin = _twin("db.local")
        return EngineRegistry({DatabaseType.POSTGRESQL: lambda: twin})

    @pytest.fixture
    def endpoint(self) -> Endpoint:
        return _endpoint("db.local")

    @pytest.fixture
    def unreachable(self) -> Endpoint:
        return _endpoint("nowhere.local")

    @pytest.fixture
    def tables(self) -> ContractTables:
        return TABLES


# --- what a wrapper owes the reader it wraps ---------------------------------------------------


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


WRAPPERS: dict[str, Callable[[DatasourceReader, Resolver], DatasourceReader]] = {
    "host guard": lambda inner, resolver: GuardedDatasourceReader(
        inner, NetworkHostGuard(resolver)
    ),
    "engine registry": lambda inner, resolver: EngineRegistry(
        {DatabaseType.POSTGRESQL: lambda: inner}
    ),
}


@pytest.mark.parametrize("wrap", WRAPPERS.values(), ids=WRAPPERS.keys())
def test_a_wrapper_propagates_a_refused_preparation_when_called_without_dialling(
    wrap: Callable[[DatasourceReader, Resolver], DatasourceReader],
) -> None:
    inner = RefusingReader()
    resolver = Resolver({"db.example.com": ["93.184.216.34"]})
    wrapper = wrap(inner, resolver)
    table = Table(None, "people", ())
    with pytest.raises(InvalidRequest, match="expects an integer"):
        wrapper.prepare(_endpoint("db.example.com"), [TableRead("people", table, ())])
    assert inner.prepared == 1
    assert resolver.asked == []
