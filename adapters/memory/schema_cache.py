"""Discovered schemas kept in process memory for a fixed time."""

from __future__ import annotations

import time
from collections.abc import Callable
from uuid import UUID

from application.ports.schema_cache import SchemaCache, SchemaKey
from domain.schema import Schema
from domain.tenant import Tenant


class InMemorySchemaCache(SchemaCache):
    """Entries expire ``ttl_seconds`` after they were stored (monotonic time); expired entries
    are removed when met and when the cache grows past ``max_entries``. One per process: the
    API's replicas each discover on their own, which keeps them independent of a shared store.
    """

    def __init__(
        self,
        ttl_seconds: float = 300.0,
        *,
        max_entries: int = 10_000,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        if ttl_seconds <= 0:
            raise ValueError("ttl_seconds must be positive")
        self._ttl = ttl_seconds
        self._max = max_entries
        self._now = now
        self._entries: dict[SchemaKey, tuple[float, Schema]] = {}

    async def get(self, key: SchemaKey) -> Schema | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        expires, schema = entry
        if expires <= self._now():
            self._entries.pop(key, None)
            return None
        return schema

    async def put(self, key: SchemaKey, schema: Schema) -> None:
        now = self._now()
        if len(self._entries) >= self._max:
            self._entries = {k: v for k, v in self._entries.items() if v[0] > now}
            while len(self._entries) >= self._max:
                self._entries.pop(next(iter(self._entries)))
        self._entries[key] = (now + self._ttl, schema)

    async def drop(self, connection_id: UUID, *, tenant: Tenant) -> None:
        for key in [
            k for k in self._entries if k.connection_id == connection_id and k.tenant == tenant
        ]:
            del self._entries[key]

    def __len__(self) -> int:
        return len(self._entries)
