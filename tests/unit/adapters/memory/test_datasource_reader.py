"""The datasource reader contract on the in-memory twin."""

from __future__ import annotations

import pytest

from application.ports.datasource_reader import DatasourceReader
from domain.connection import Endpoint
from tests.contracts.datasource_reader import ContractTables, DatasourceReaderContract
from tests.support.datasources import TABLES, contract_endpoint, contract_twin


class TestInMemoryDatasourceReader(DatasourceReaderContract):
    @pytest.fixture
    def reader(self) -> DatasourceReader:
        return contract_twin("db.local")

    @pytest.fixture
    def endpoint(self) -> Endpoint:
        return contract_endpoint("db.local")

    @pytest.fixture
    def unreachable(self) -> Endpoint:
        return contract_endpoint("nowhere.local")

    @pytest.fixture
    def tables(self) -> ContractTables:
        return TABLES
