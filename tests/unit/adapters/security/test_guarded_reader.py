"""The guarded reader: the host guard's checks around every reader call that dials, and the
datasource reader contract through it."""

from __future__ import annotations

import socket

import pytest

from adapters.memory.datasource_reader import InMemoryDatasourceReader, MemoryTable
from adapters.security.guarded_reader import GuardedDatasourceReader
from adapters.security.host_guard import NetworkHostGuard
from application.connections.endpoints import TrustedEndpoint
from application.errors import ForbiddenHost
from application.ports.datasource_reader import DatasourceReader
from domain.connection import DatabaseType, Endpoint
from domain.errors import InvalidRequest
from domain.schema import Column, Schema, Table, TableRead
from tests.contracts.datasource_reader import ContractTables, DatasourceReaderContract
from tests.support.datasources import (
    TABLES,
    RefusingReader,
    Resolver,
    contract_endpoint,
    contract_twin,
)


def resolver(table: dict[str, list[str]]):
    async def resolve(host: str, port: int) -> list[str]:
        if host not in table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return table[host]

    return resolve


def _endpoint(host: str, ssl_mode: str = "", cls=Endpoint) -> Endpoint:
    return cls(
        type=DatabaseType.POSTGRESQL,
        host=host,
        port=5432,
        database_name="app",
        user_name="u",
        password="p",
        ssl_mode=ssl_mode,
    )


class Recording(InMemoryDatasourceReader):
    def __init__(self) -> None:
        super().__init__()
        self.hosts: list[str] = []

    async def test(self, endpoint, timeout):
        self.hosts.append(endpoint.host)

    async def discover(self, endpoint, scope):
        self.hosts.append(endpoint.host)
        return Schema(tables={})


async def test_guarded_reader_dials_the_address_it_checked():
    inner = Recording()
    reader = GuardedDatasourceReader(
        inner, NetworkHostGuard(resolver({"db.example.com": ["93.184.216.34"]}))
    )
    await reader.test(_endpoint("db.example.com"), 1)
    await reader.discover(_endpoint("db.example.com", "require"), ())
    assert inner.hosts == ["93.184.216.34", "93.184.216.34"]
    with pytest.raises(ForbiddenHost):
        await reader.test(_endpoint("localhost"), 1)
    assert len(inner.hosts) == 2


async def test_guarded_reader_keeps_the_name_when_tls_verifies_it():
    inner = Recording()
    reader = GuardedDatasourceReader(
        inner, NetworkHostGuard(resolver({"db.example.com": ["93.184.216.34"]}))
    )
    await reader.test(_endpoint("db.example.com", "verify-full"), 1)
    assert inner.hosts == ["db.example.com"]


async def test_guarded_reader_lets_internal_datasources_through():
    inner = Recording()
    reader = GuardedDatasourceReader(inner, NetworkHostGuard(resolver({})))
    await reader.test(_endpoint("10.0.0.5", cls=TrustedEndpoint), 1)
    assert inner.hosts == ["10.0.0.5"]


async def test_guarded_reader_extracts_through_the_pinned_address():
    inner = InMemoryDatasourceReader()
    inner.database("93.184.216.34", "app").tables["t"] = MemoryTable(
        columns=[("id", "integer")], rows=[{"id": 1}]
    )
    reader = GuardedDatasourceReader(
        inner, NetworkHostGuard(resolver({"db.example.com": ["93.184.216.34"]}))
    )
    table = Table(None, "t", (Column("id", "integer"),))
    endpoint = _endpoint("db.example.com")
    prepared = reader.prepare(endpoint, [TableRead("t", table, table.columns)])
    chunks = [c async for c in reader.stream(endpoint, prepared)]
    assert [c.data for c in chunks] == [b'{"id":1}']


async def test_guarded_reader_checks_the_host_when_the_stream_starts_before_the_engine_dials():
    class Streams(InMemoryDatasourceReader):
        streamed: list[str] = []

        def stream(self, endpoint, prepared):
            self.streamed.append(endpoint.host)
            return super().stream(endpoint, prepared)

    inner = Streams()
    inner.database("db.example.com", "app").tables["t"] = MemoryTable(columns=[("id", "integer")])
    reader = GuardedDatasourceReader(inner, NetworkHostGuard(resolver({})))
    table = Table(None, "t", (Column("id", "integer"),))
    endpoint = _endpoint("localhost")
    prepared = reader.prepare(endpoint, [TableRead("t", table, table.columns)])
    stream = reader.stream(endpoint, prepared)
    assert inner.streamed == []
    with pytest.raises(ForbiddenHost):
        await anext(stream)
    assert inner.streamed == []


class TestGuardedDatasourceReader(DatasourceReaderContract):
    """The twin answers only at the addresses the guard pins, so every call that reaches it
    went through the guard."""

    @pytest.fixture
    def reader(self) -> DatasourceReader:
        resolver = Resolver(
            {"db.example.com": ["93.184.216.34"], "gone.example.com": ["93.184.216.35"]}
        )
        return GuardedDatasourceReader(contract_twin("93.184.216.34"), NetworkHostGuard(resolver))

    @pytest.fixture
    def endpoint(self) -> Endpoint:
        return contract_endpoint("db.example.com")

    @pytest.fixture
    def unreachable(self) -> Endpoint:
        return contract_endpoint("gone.example.com")

    @pytest.fixture
    def tables(self) -> ContractTables:
        return TABLES


def test_a_refused_preparation_propagates_when_called_without_dialling() -> None:
    inner = RefusingReader()
    resolver = Resolver({"db.example.com": ["93.184.216.34"]})
    reader = GuardedDatasourceReader(inner, NetworkHostGuard(resolver))
    table = Table(None, "people", ())
    with pytest.raises(InvalidRequest, match="expects an integer"):
        reader.prepare(contract_endpoint("db.example.com"), [TableRead("people", table, ())])
    assert inner.prepared == 1
    assert resolver.asked == []
