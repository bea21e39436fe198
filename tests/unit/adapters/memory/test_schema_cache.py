"""The in-memory schema cache: entries expire, stay bounded, and are kept apart per tenant."""

from __future__ import annotations

from uuid import UUID, uuid4

from adapters.memory.schema_cache import InMemorySchemaCache
from application.ports.schema_cache import SchemaKey
from domain.schema import Schema
from domain.tenant import SINGLE_TENANT, Tenant


class Ticks:
    def __init__(self) -> None:
        self.value = 0.0

    def __call__(self) -> float:
        return self.value


async def test_schema_cache_expires_and_drops_per_connection():
    ticks = Ticks()
    cache = InMemorySchemaCache(300, now=ticks)
    first, second = uuid4(), uuid4()
    schema = Schema(tables={})
    await cache.put(SchemaKey(first, 1, ("public",), tenant=SINGLE_TENANT), schema)
    await cache.put(SchemaKey(first, 2, (), tenant=SINGLE_TENANT), schema)
    await cache.put(SchemaKey(second, 1, (), tenant=SINGLE_TENANT), schema)
    assert await cache.get(SchemaKey(first, 1, ("public",), tenant=SINGLE_TENANT)) is schema
    assert await cache.get(SchemaKey(first, 1, (), tenant=SINGLE_TENANT)) is None
    await cache.drop(first, tenant=SINGLE_TENANT)
    assert len(cache) == 1
    ticks.value = 300.0
    assert (
        await cache.get(SchemaKey(second, 1, (), tenant=SINGLE_TENANT)) is None and len(cache) == 0
    )


async def test_schema_cache_stays_bounded():
    cache = InMemorySchemaCache(300, max_entries=3, now=Ticks())
    for version in range(10):
        await cache.put(SchemaKey(uuid4(), version, (), tenant=SINGLE_TENANT), Schema(tables={}))
    assert len(cache) == 3


A, B = Tenant("tenant-a"), Tenant("tenant-b")
ID = UUID(int=7)


async def test_entries_are_per_tenant_and_dropped_per_tenant():
    cache = InMemorySchemaCache(60, now=lambda: 0.0)
    schema = Schema(tables={})
    await cache.put(SchemaKey(ID, 1, (), A), schema)
    assert await cache.get(SchemaKey(ID, 1, (), A)) is schema
    assert await cache.get(SchemaKey(ID, 1, (), B)) is None
    assert await cache.get(SchemaKey(ID, 1, (), tenant=SINGLE_TENANT)) is None
    await cache.drop(ID, tenant=B)
    assert await cache.get(SchemaKey(ID, 1, (), A)) is schema
    await cache.drop(ID, tenant=A)
    assert len(cache) == 0
