"""Followers wake on PostgreSQL notifications: an append in another process (here another
store, with its own connections) reaches a follower that polls only once a minute."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from uuid import uuid4

import psycopg
import pytest

from adapters.common.postgres import PostgresAddress
from adapters.eventstore.listener import PostgresLogWatch
from adapters.eventstore.store import EventStore, event_store_for
from application.policies.follower import LogFollower, WakeOnGrowth
from application.ports.job_event_store import LoggedEvent
from entrypoints.composition.infrastructure import log_watch_for
from entrypoints.settings import Settings
from tests.contracts.job_event_store import _full_history
from tests.integration.conftest import fresh_pg_database

NEVER = 60.0  # a poll interval no test waits for
SOON = 10.0


@pytest.fixture(scope="module")
def database_url() -> Iterator[str]:
    with fresh_pg_database("fetcher_watch_test") as url:
        yield url


@pytest.fixture
async def stores(database_url: str) -> AsyncIterator[tuple[EventStore, ...]]:
    """The relay's store and a writer's store (as another process would have), opened."""
    address = PostgresAddress.from_url(database_url)
    relay, writer = (event_store_for(address) for _ in range(2))
    await relay.open()
    await writer.open()
    yield relay, writer
    await writer.close()
    await relay.close()


class Seen:
    def __init__(self) -> None:
        self.ids: list[int] = []
        self.changed = asyncio.Event()

    async def __call__(self, item: LoggedEvent) -> None:
        self.ids.append(item.notification_id)
        self.changed.set()

    async def until(self, count: int) -> None:
        while len(self.ids) < count:
            self.changed.clear()
            await asyncio.wait_for(self.changed.wait(), SOON)


@contextlib.asynccontextmanager
async def following(
    store: EventStore, watch: PostgresLogWatch, seen: Seen
) -> AsyncIterator[LogFollower]:
    follower = LogFollower(
        name=f"test-{uuid4().hex[:8]}", store=store, handle=seen, poll_interval=NEVER
    )
    waker = WakeOnGrowth(name="watch", watch=watch, followers=[follower])
    stop = asyncio.Event()
    tasks = [asyncio.ensure_future(follower.run(stop)), asyncio.ensure_future(waker.run(stop))]
    try:
        await asyncio.wait_for(watch.listening.wait(), SOON)
        yield follower
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(*tasks), SOON)


def watch_of(database_url: str, store: EventStore) -> PostgresLogWatch:
    channel = store.notification_channel()
    assert channel is not None
    return PostgresLogWatch(PostgresAddress.from_url(database_url), channel)


async def test_a_follower_wakes_on_an_append_from_another_process(database_url, stores):
    relay, writer = stores
    seen = Seen()
    async with following(relay, watch_of(database_url, relay), seen):
        await asyncio.sleep(0.2)  # the follower has read the empty log and sleeps
        for round_ in range(1, 4):
            last = await writer.append(_full_history(uuid4()))
            await seen.until(4 * round_)
            assert seen.ids[-1] == last


async def test_the_watch_reconnects_when_its_connection_is_cut(database_url, stores):
    relay, writer = stores
    seen, watch = Seen(), watch_of(database_url, relay)
    async with following(relay, watch, seen):
        with psycopg.connect(database_url, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND query LIKE 'LISTEN%%'"
            )
        # The watch notices the cut (``listening`` cleared), then listens again.
        for _ in range(int(SOON / 0.01)):
            if not watch.listening.is_set():
                break
            await asyncio.sleep(0.01)
        assert not watch.listening.is_set()
        await asyncio.wait_for(watch.listening.wait(), SOON)

        await writer.append(_full_history(uuid4()))
        await seen.until(4)


def test_a_relay_on_postgresql_listens_and_elsewhere_does_not(database_url, tmp_path):
    on_postgres = Settings.from_env(
        {"FETCHER_DATABASE_URL": database_url, "FETCHER_DATA_DIR": str(tmp_path)}
    )
    embedded = Settings.from_env({"FETCHER_DATA_DIR": str(tmp_path)})
    store = event_store_for(PostgresAddress.from_url(database_url))

    async def check() -> None:
        # The store's pool lives on the loop that opened it: opened and closed on one.
        await store.open()
        try:
            assert isinstance(log_watch_for(on_postgres, store), PostgresLogWatch)
            assert log_watch_for(embedded, store) is None
        finally:
            await store.close()

    asyncio.run(check())
