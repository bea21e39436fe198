"""The engine registry: the datasource reader contract through it, and what it owes the
reader it picks."""

from __future__ import annotations

import pytest

from adapters.datasources.registry import EngineRegistry
from application.ports.datasource_reader import DatasourceReader
from domain.connection import DatabaseType, Endpoint
from domain.errors import InvalidRequest
from domain.schema import Table, TableRead
from tests.contracts.datasource_reader import ContractTables, DatasourceReaderContract
from tests.support.datasources import (
    TABLES,
    RefusingReader,
    contract_endpoint,
    contract_twin,
)


class TestEngineRegistry(DatasourceReaderContract):
    @pytest.fixture
    def reader(self) -> DatasourceReader:
        twin = contract_twin("db.local")
        return EngineRegistry({DatabaseType.POSTGRESQL: lambda: twin})

    @pytest.fixture
    def endpoint(self) -> Endpoint:
        return contract_endpoint("db.local")

    @pytest.fixture
    def unreachable(self) -> Endpoint:
        return contract_endpoint("nowhere.local")

    @pytest.fixture
    def tables(self) -> ContractTables:
        return TABLES


def test_a_refused_preparation_propagates_when_called_without_dialling() -> None:
    inner = RefusingReader()
    registry = EngineRegistry({DatabaseType.POSTGRESQL: lambda: inner})
    table = Table(None, "people", ())
    with pytest.raises(InvalidRequest, match="expects an integer"):
        registry.prepare(contract_endpoint("db.example.com"), [TableRead("people", table, ())])
    assert inner.prepared == 1
