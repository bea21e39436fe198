"""SchemaCachingReader: one discovery per connection version and scope within the cache's life."""

from __future__ import annotations

import uuid
from dataclasses import replace

from adapters.memory.datasource_reader import MemoryTable
from adapters.memory.schema_cache import InMemorySchemaCache
from application.connections.cached_discovery import SchemaCachingReader
from domain.connection import ConnectionIdentity
from domain.tenant import SINGLE_TENANT, Tenant
from tests.support.datasources import contract_endpoint, contract_twin

CONNECTION = uuid.uuid4()


def _identity(version: int = 1, tenant: Tenant = SINGLE_TENANT) -> ConnectionIdentity:
    return ConnectionIdentity(tenant, CONNECTION, version)


async def test_a_connection_version_is_discovered_once_while_cached() -> None:
    twin = contract_twin("db")
    now = [0.0]
    reader = SchemaCachingReader(twin, InMemorySchemaCache(10, now=lambda: now[0]))
    endpoint = replace(contract_endpoint("db"), identity=_identity())
    first = await reader.discover(endpoint, ["public"])
    twin.database("db", "app").tables["added"] = MemoryTable(columns=[("id", "integer")])
    assert await reader.discover(endpoint, ["public"]) == first  # from the cache
    now[0] = 11.0  # past the time to live
    assert "added" in (await reader.discover(endpoint, ["public"])).tables


async def test_versions_tenants_scopes_and_unstored_endpoints_are_discovered_apart() -> None:
    twin = contract_twin("db")
    reader = SchemaCachingReader(twin, InMemorySchemaCache(60))
    endpoint = replace(contract_endpoint("db"), identity=_identity())
    await reader.discover(endpoint, ["public"])
    twin.database("db", "app").tables["added"] = MemoryTable(columns=[("id", "integer")])
    others = [
        replace(endpoint, identity=_identity(version=2)),
        replace(endpoint, identity=_identity(tenant=Tenant("other"))),
        replace(endpoint, identity=None),
    ]
    for other in others:
        assert "added" in (await reader.discover(other, ["public"])).tables
    assert "added" in (await reader.discover(endpoint, ["public", "sales"])).tables
    assert "added" not in (await reader.discover(endpoint, ["public"])).tables
