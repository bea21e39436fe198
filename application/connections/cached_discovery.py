"""A datasource reader that reuses a discovered schema for a short while.

Discovery runs the engine's catalogue query (on PostgreSQL ``information_schema``: 5-15 ms of
the datasource's CPU and a round trip) for every job; a burst of small jobs on one connection
asks the same question many times a second. This wrapper answers ``discover`` from a
``SchemaCache`` keyed by the endpoint's identity (tenant, connection id, version) and the scope,
and passes everything else through. Endpoints without an identity are always discovered.

The cost: within the cache's time to live, a job reads the tables and columns as they were
discovered; a column added meanwhile is not in a ``*`` read, a dropped one fails the read. A
changed connection (new version) is discovered afresh at once.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from typing import Any

from application.ports.datasource_reader import DatasourceReader, PreparedReads, RowChunk
from application.ports.schema_cache import SchemaCache, SchemaKey
from domain.connection import Endpoint
from domain.schema import Schema, TableRead


class SchemaCachingReader(DatasourceReader):
    def __init__(self, inner: DatasourceReader, cache: SchemaCache) -> None:
        self._inner = inner
        self._cache = cache

    async def test(self, endpoint: Endpoint, timeout: float) -> None:
        await self._inner.test(endpoint, timeout)

    async def discover(self, endpoint: Endpoint, scope: Sequence[str]) -> Schema:
        identity = endpoint.identity
        if identity is None:
            return await self._inner.discover(endpoint, scope)
        key = SchemaKey(identity.connection_id, identity.version, tuple(scope), identity.tenant)
        schema = await self._cache.get(key)
        if schema is None:
            schema = await self._inner.discover(endpoint, scope)
            await self._cache.put(key, schema)
        return schema

    def prepare(self, endpoint: Endpoint, reads: Sequence[TableRead]) -> PreparedReads[Any]:
        return self._inner.prepare(endpoint, reads)

    def stream(
        self, endpoint: Endpoint, prepared: PreparedReads[Any]
    ) -> AsyncGenerator[RowChunk, None]:
        return self._inner.stream(endpoint, prepared)
