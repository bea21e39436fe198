"""ConnectionPools and SimplePool with fake connections: keys, retirement, bounds, failures."""

from __future__ import annotations

import asyncio
import itertools
import uuid
from dataclasses import replace

import pytest

from adapters.datasources.common.pools import ConnectionPools, SimplePool
from application.errors import DatasourceUnavailable
from domain.connection import ConnectionIdentity, DatabaseType, Endpoint
from domain.errors import FetcherError
from domain.tenant import SINGLE_TENANT, Tenant

CONNECTION = uuid.uuid4()
BASE = Endpoint(
    type=DatabaseType.MYSQL, host="db", port=3306, database_name="app", user_name="u",
    password="p",
)  # fmt: skip


def _endpoint(version: int = 1, tenant: Tenant = SINGLE_TENANT, host: str = "db") -> Endpoint:
    return replace(BASE, host=host, identity=ConnectionIdentity(tenant, CONNECTION, version))


class World:
    """Fake connections (numbers) and a record of what was opened, closed and dropped."""

    def __init__(self, *, failing: bool = False) -> None:
        self.numbers = itertools.count(1)
        self.opened: list[tuple[str, int]] = []
        self.closed: list[int] = []
        self.dropped: list[int] = []
        self.pools_closed = 0
        self.failing = failing

    async def connect(self, endpoint: Endpoint) -> int:
        if self.failing:
            raise ConnectionRefusedError("no")
        number = next(self.numbers)
        self.opened.append((endpoint.host, number))
        return number

    async def close(self, connection: int) -> None:
        self.closed.append(connection)

    def drop(self, connection: int) -> None:
        self.dropped.append(connection)

    def pools(self, size: int = 2, idle: float = 60.0) -> ConnectionPools[SimplePool[int], int]:
        async def open_pool(endpoint: Endpoint, size: int, idle: float) -> SimplePool[int]:
            return SimplePool(
                lambda: self.connect(endpoint), self.close, self.drop, size=size, idle_seconds=idle
            )

        async def close_pool(pool: SimplePool[int]) -> None:
            self.pools_closed += 1
            await pool.close()

        def failure(error: BaseException) -> FetcherError:
            return DatasourceUnavailable("failed to connect to datasource")

        return ConnectionPools(
            open_pool=open_pool,
            close_pool=close_pool,
            connect=self.connect,
            close=self.close,
            failure=failure,
            size=size,
            idle_seconds=idle,
        )


async def _use(pools: ConnectionPools[SimplePool[int], int], endpoint: Endpoint) -> int:
    async with pools.connection(endpoint) as connection:
        return connection


async def test_one_identity_reuses_its_connection_and_aclose_closes_it() -> None:
    world = World()
    pools = world.pools()
    assert [await _use(pools, _endpoint()) for _ in range(3)] == [1, 1, 1]
    await pools.aclose()
    assert world.closed == [1]
    assert pools.keys == frozenset()


async def test_other_versions_tenants_and_addresses_get_their_own_connections() -> None:
    world = World()
    pools = world.pools()
    first = await _use(pools, _endpoint())
    other_tenant = await _use(pools, _endpoint(tenant=Tenant("t2")))
    assert other_tenant != first
    assert len(pools.keys) == 2
    newer = await _use(pools, _endpoint(version=2))
    assert newer not in (first, other_tenant)
    await asyncio.sleep(0)  # the retired pool closes in the background
    assert first in world.closed  # version 1 retired; the other tenant's pool kept
    assert other_tenant not in world.closed
    moved = await _use(pools, _endpoint(version=2, host="10.0.0.9"))
    assert moved not in (first, other_tenant, newer)
    await pools.aclose()


async def test_an_endpoint_without_identity_connects_and_closes_every_time() -> None:
    world = World()
    pools = world.pools()
    unstored = replace(BASE, identity=None)
    assert [await _use(pools, unstored) for _ in range(2)] == [1, 2]
    assert world.closed == [1, 2]
    assert pools.keys == frozenset()


async def test_size_zero_turns_pooling_off() -> None:
    world = World()
    pools = world.pools(size=0)
    assert [await _use(pools, _endpoint()) for _ in range(2)] == [1, 2]
    assert world.closed == [1, 2]


async def test_the_pool_bounds_leased_connections() -> None:
    world = World()
    pools = world.pools(size=2)
    inside = 0
    most = 0

    async def job() -> None:
        nonlocal inside, most
        async with pools.connection(_endpoint()):
            inside += 1
            most = max(most, inside)
            await asyncio.sleep(0.01)
            inside -= 1

    await asyncio.gather(*(job() for _ in range(6)))
    assert most == 2
    assert len(world.opened) == 2
    await pools.aclose()


async def test_a_lease_that_fails_drops_its_connection() -> None:
    world = World()
    pools = world.pools()
    with pytest.raises(RuntimeError):
        async with pools.connection(_endpoint()):
            raise RuntimeError("half-read result")
    assert world.dropped == [1]
    assert await _use(pools, _endpoint()) == 2
    await pools.aclose()


async def test_a_failed_connect_raises_the_engine_error() -> None:
    pools = World(failing=True).pools()
    with pytest.raises(DatasourceUnavailable):
        await _use(pools, _endpoint())


async def test_idle_pools_and_idle_connections_are_closed() -> None:
    world = World()
    pools = world.pools(idle=0.01)
    first = await _use(pools, _endpoint())
    await asyncio.sleep(0.03)
    other = await _use(pools, _endpoint(tenant=Tenant("t2")))  # any use sweeps idle pools
    await asyncio.sleep(0)
    assert first in world.closed
    assert other not in world.closed
    await pools.aclose()
