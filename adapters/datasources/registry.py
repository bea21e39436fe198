"""Dispatches datasource calls to the engine adapter of each endpoint's type."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence

from application.errors import DatasourceUnavailable
from application.ports.datasource_reader import DatasourceReader, RowChunk
from domain.connection import DatabaseType, Endpoint
from domain.schema import Schema, TableRead


class EngineRegistry(DatasourceReader):
    def __init__(self, engines: Mapping[DatabaseType, DatasourceReader]) -> None:
        self._engines = dict(engines)

    def _engine(self, endpoint: Endpoint) -> DatasourceReader:
        engine = self._engines.get(endpoint.type)
        if engine is None:
            raise DatasourceUnavailable(f"unsupported database type {endpoint.type.value}")
        return engine

    async def test(self, endpoint: Endpoint, timeout: float) -> None:
        await self._engine(endpoint).test(endpoint, timeout)

    async def discover(self, endpoint: Endpoint, scope: Sequence[str]) -> Schema:
        return await self._engine(endpoint).discover(endpoint, scope)

    def extract(self, endpoint: Endpoint, reads: Sequence[TableRead]) -> AsyncIterator[RowChunk]:
        return self._engine(endpoint).extract(endpoint, reads)
