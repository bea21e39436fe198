"""Dispatches datasource calls to the engine adapter of each endpoint's type.

Engines are given as factories and built on first use, so a process only loads the database
drivers it actually needs (each costs several MiB of memory)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from application.errors import DatasourceUnavailable
from application.ports.datasource_reader import DatasourceReader, PreparedReads, RowChunk
from domain.connection import DatabaseType, Endpoint
from domain.schema import Schema, TableRead


@runtime_checkable
class _KeepsConnections(Protocol):
    async def aclose(self) -> None: ...


class EngineRegistry(DatasourceReader):
    """``aclose`` closes the connections the engines built so far keep open (their pools)."""

    def __init__(self, factories: Mapping[DatabaseType, Callable[[], DatasourceReader]]) -> None:
        self._factories = dict(factories)
        self._engines: dict[DatabaseType, DatasourceReader] = {}

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

    def prepare(self, endpoint: Endpoint, reads: Sequence[TableRead]) -> PreparedReads[Any]:
        return self._engine(endpoint).prepare(endpoint, reads)

    def stream(
        self, endpoint: Endpoint, prepared: PreparedReads[Any]
    ) -> AsyncGenerator[RowChunk, None]:
        return self._engine(endpoint).stream(endpoint, prepared)

    async def aclose(self) -> None:
        for engine in self._engines.values():
            if isinstance(engine, _KeepsConnections):
                await engine.aclose()
