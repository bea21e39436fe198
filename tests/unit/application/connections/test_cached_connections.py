"""Connection lookups (the API's, the worker's): remembered briefly per tenant, forgotten on
every write made in the process."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from uuid import uuid4

from adapters.memory.connection_repository import InMemoryConnectionRepository
from application.connections.cached import CachingConnectionRepository
from domain.connection import Connection, DatabaseType
from domain.tenant import SINGLE_TENANT, Tenant
from tests.support.twins import FakeClock


class CountingRepository(InMemoryConnectionRepository):
    def __init__(self) -> None:
        super().__init__()
        self.lookups = 0

    async def by_config_names(
        self, names: Sequence[str], *, tenant: Tenant = SINGLE_TENANT
    ) -> dict[str, Connection]:
        self.lookups += 1
        return await super().by_config_names(names, tenant=tenant)


def connection(name: str, clock: FakeClock, tenant: Tenant = SINGLE_TENANT) -> Connection:
    return Connection(
        id=uuid4(),
        product_name="p",
        config_name=name,
        type=DatabaseType.POSTGRESQL,
        host="db.example",
        port=5432,
        database_name="d",
        user_name="u",
        password=None,
        created_at=clock.now(),
        tenant=tenant,
    )


async def test_a_lookup_is_reused_within_its_window_then_read_again():
    clock, inner = FakeClock(), CountingRepository()
    await inner.add(connection("pg", clock))
    cached = CachingConnectionRepository(inner, 2, clock)
    first = await cached.by_config_names(["pg"], tenant=SINGLE_TENANT)
    clock.advance(seconds=1.9)
    assert await cached.by_config_names(["pg"], tenant=SINGLE_TENANT) == first
    assert inner.lookups == 1
    clock.advance(seconds=0.1)
    await cached.by_config_names(["pg"], tenant=SINGLE_TENANT)
    assert inner.lookups == 2


async def test_tenants_never_share_a_lookup():
    clock, inner = FakeClock(), CountingRepository()
    acme, globex = Tenant("acme"), Tenant("globex")
    await inner.add(connection("pg", clock, acme))
    cached = CachingConnectionRepository(inner, 2, clock)
    assert set(await cached.by_config_names(["pg"], tenant=acme)) == {"pg"}
    assert await cached.by_config_names(["pg"], tenant=globex) == {}
    assert await cached.by_config_names(["pg"], tenant=SINGLE_TENANT) == {}


async def test_a_missing_name_is_not_remembered():
    clock, inner = FakeClock(), CountingRepository()
    cached = CachingConnectionRepository(inner, 2, clock)
    assert await cached.by_config_names(["pg"], tenant=SINGLE_TENANT) == {}
    await inner.add(connection("pg", clock))
    assert set(await cached.by_config_names(["pg"], tenant=SINGLE_TENANT)) == {"pg"}


async def test_writes_through_it_are_seen_at_once():
    clock, inner = FakeClock(), CountingRepository()
    stored = connection("pg", clock)
    cached = CachingConnectionRepository(inner, 60, clock)
    await cached.add(stored)
    assert (await cached.by_config_names(["pg"], tenant=SINGLE_TENANT))["pg"].version == 1
    clock.advance(seconds=1)
    await cached.update(replace(stored, host="other.example", version=2, updated_at=clock.now()))
    assert (await cached.by_config_names(["pg"], tenant=SINGLE_TENANT))[
        "pg"
    ].host == "other.example"
    await cached.soft_delete(stored.id, clock.now(), tenant=SINGLE_TENANT)
    assert await cached.by_config_names(["pg"], tenant=SINGLE_TENANT) == {}


async def test_a_window_of_zero_reads_every_time():
    clock, inner = FakeClock(), CountingRepository()
    await inner.add(connection("pg", clock))
    cached = CachingConnectionRepository(inner, 0, clock)
    await cached.by_config_names(["pg"], tenant=SINGLE_TENANT)
    await cached.by_config_names(["pg"], tenant=SINGLE_TENANT)
    assert inner.lookups == 2


async def test_a_write_through_one_cache_makes_its_linked_caches_forget():
    clock, inner = FakeClock(), CountingRepository()
    stored = connection("pg", clock)
    await inner.add(stored)
    worker = CachingConnectionRepository(inner, 60, clock)
    api = CachingConnectionRepository(inner, 60, clock, linked=(worker,))
    assert (await worker.by_config_names(["pg"], tenant=SINGLE_TENANT))["pg"].version == 1
    clock.advance(seconds=1)
    await api.update(replace(stored, host="other.example", version=2, updated_at=clock.now()))
    renewed = (await worker.by_config_names(["pg"], tenant=SINGLE_TENANT))["pg"]
    assert (renewed.version, renewed.host) == (2, "other.example")
    await api.soft_delete(stored.id, clock.now(), tenant=SINGLE_TENANT)
    assert await worker.by_config_names(["pg"], tenant=SINGLE_TENANT) == {}


async def test_an_edit_made_elsewhere_is_used_no_later_than_the_window():
    clock, inner = FakeClock(), CountingRepository()
    stored = connection("pg", clock)
    await inner.add(stored)
    worker = CachingConnectionRepository(inner, 1, clock)
    await worker.by_config_names(["pg"], tenant=SINGLE_TENANT)
    await inner.update(replace(stored, host="other.example", version=2, updated_at=clock.now()))
    clock.advance(seconds=0.5)
    assert (await worker.by_config_names(["pg"], tenant=SINGLE_TENANT))["pg"].version == 1
    clock.advance(seconds=0.5)
    assert (await worker.by_config_names(["pg"], tenant=SINGLE_TENANT))["pg"].version == 2
    await inner.soft_delete(stored.id, clock.now(), tenant=SINGLE_TENANT)
    clock.advance(seconds=1)
    assert await worker.by_config_names(["pg"], tenant=SINGLE_TENANT) == {}
