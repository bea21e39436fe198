"""Dispatches datasource calls to the engine adapter of each endpoint's type.

Engines are given as factories and built on first use, so a process only loads the database
drivers it actually needs (each costs several MiB of memory)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence

from application.errors import DatasourceUnavailable
from application.ports.datasource_reader import DatasourceReader, RowChunk
from domain.connection import DatabaseType, Endpoint
from domain.schema import Schema, TableRead


class EngineRegistry(DatasourceReader):
    def __init__(self, factories: Mapping[DatabaseType, Callable[[], DatasourceReader]]) -> None:
        self._factories = dict(factories)
        self._engines: dict[DatabaseType, DatasourceReader] = {}

    @classmethod
    def of(cls, readers: Mapping[DatabaseType, DatasourceReader]) -> EngineRegistry:
        """A registry of readers that are already built."""
        registry = cls({db_type: (lambda r=reader: r) for db_type, reader in readers.items()})
        registry._engines.update(readers)
        return registry

    @property
    def types(self) -> frozenset[DatabaseType]:
        return frozenset(self._factories)

    def _engine(self, endpoint: Endpoint) -> DatasourceReader:
        engine = self._engines.get(endpoint.type)
        if engine is None:
            factory = self._factories.get(endpoint.type)
            if factory is None:
                raise DatasourceUnavailable(f"unsupported database type {endpoint.type.value}")
            engine = self._engines[endpoint.type] = factory()
        return engine

    async def test(self, endpoint: Endpoint, timeout: float) -> None:
        await self._engine(endpoint).test(endpoint, timeout)

    async def discover(self, endpoint: Endpoint, scope: Sequence[str]) -> Schema:
        return await self._engine(endpoint).discover(endpoint, scope)

    def extract(self, endpoint: Endpoint, reads: Sequence[TableRead]) -> AsyncIterator[RowChunk]:
        return self._engine(endpoint).extract(endpoint, reads)
