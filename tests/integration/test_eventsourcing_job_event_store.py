"""The job event store contract on the eventsourcing adapter: in process, SQLite and
PostgreSQL; files and servers that fail, and events that survive reopening."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from uuid import uuid4

import pytest

from adapters.common.postgres import PostgresAddress
from adapters.eventstore.store import EventsourcingJobEventStore
from application.ports.job_event_store import JobEventStore
from domain.errors import Unavailable
from tests.contracts.job_event_store import JobEventStoreContract, _full_history, _requested
from tests.integration.conftest import fresh_pg_database


class TestPopoJobEventStore(JobEventStoreContract):
    @pytest.fixture
    async def store(self) -> AsyncIterator[JobEventStore]:
        store = EventsourcingJobEventStore.in_memory()
        yield store
        await store.close()


class TestSqliteJobEventStore(JobEventStoreContract):
    @pytest.fixture
    async def store(self, tmp_path: Path) -> AsyncIterator[JobEventStore]:
        store = EventsourcingJobEventStore.for_database(tmp_path / "data" / "events.db")
        await store.open()
        yield store
        await store.close()

    async def test_unopenable_file_raises_unavailable(self, tmp_path: Path) -> None:
        (tmp_path / "a-directory.db").mkdir()
        store = EventsourcingJobEventStore.for_database(tmp_path / "a-directory.db")
        try:
            with pytest.raises(Unavailable):
                await store.check()
        finally:
            await store.close()

    async def test_events_survive_reopening_the_file(self, tmp_path: Path) -> None:
        job = uuid4()
        first = EventsourcingJobEventStore.for_database(tmp_path / "reopen.db")
        await first.append(_full_history(job))
        await first.advance("projection", 2)
        await first.close()

        second = EventsourcingJobEventStore.for_database(tmp_path / "reopen.db")
        try:
            assert await second.job_events(job) == _full_history(job)
            assert await second.position("projection") == 2
        finally:
            await second.close()


@pytest.fixture(scope="module")
def pg_event_database() -> Iterator[str]:
    with fresh_pg_database("fetcher_es_test") as url:
        yield url


class TestPostgresJobEventStore(JobEventStoreContract):
    async def test_unreachable_server_raises_unavailable(self) -> None:
        store = EventsourcingJobEventStore.for_database(
            PostgresAddress.from_url("postgresql://postgres@127.0.0.1:1/fetcher"), connect_timeout=1
        )
        try:
            with pytest.raises(Unavailable):
                await store.check()
            with pytest.raises(Unavailable):
                await store.append([_requested()])
        finally:
            await store.close()

    @pytest.fixture
    async def store(self, pg_event_database: str) -> AsyncIterator[JobEventStore]:
        # A schema per test gives each test fresh tables in the module's database.
        store = EventsourcingJobEventStore.for_database(
            PostgresAddress.from_url(pg_event_database), schema=f"t_{uuid.uuid4().hex[:12]}"
        )
        await store.open()
        yield store
        await store.close()

    async def test_events_survive_reopening_the_store(self, pg_event_database: str) -> None:
        job, schema = uuid4(), f"t_{uuid.uuid4().hex[:12]}"
        first = EventsourcingJobEventStore.for_database(
            PostgresAddress.from_url(pg_event_database), schema=schema
        )
        await first.append(_full_history(job))
        await first.advance("projection", 2)
        await first.close()

        second = EventsourcingJobEventStore.for_database(
            PostgresAddress.from_url(pg_event_database), schema=schema
        )
        try:
            assert await second.job_events(job) == _full_history(job)
            assert await second.position("projection") == 2
        finally:
            await second.close()


async def test_a_fail_fast_store_answers_unavailable_within_its_connect_timeout(
    pg_event_database: str,
) -> None:
    """What the API uses: with its database gone, a call is ``Unavailable`` within the connect
    timeout (the library's ten tries would take about a minute), and works again once the
    database is back, on fresh connections."""
    import time
    from urllib.parse import urlsplit

    from tests.support.tcp_proxy import ThreadedTcpProxy

    address = PostgresAddress.from_url(pg_event_database)
    with ThreadedTcpProxy(address.host, address.port) as proxy:
        proxied = PostgresAddress(
            database=address.database,
            host="127.0.0.1",
            port=proxy.port,
            user=urlsplit(pg_event_database).username or "postgres",
            password=address.password,
        )
        store = EventsourcingJobEventStore.for_database(
            proxied, schema=f"t_{uuid.uuid4().hex[:12]}", connect_timeout=2, fail_fast=True
        )
        try:
            await store.open()
            job = uuid4()
            await store.append(_full_history(job))
            proxy.cut()
            for call in (store.job_events(job), store.position("projection")):
                started = time.monotonic()
                with pytest.raises(Unavailable):
                    await call
                assert time.monotonic() - started < 6
            proxy.restore()
            assert await store.job_events(job) == _full_history(job)
        finally:
            await store.close()
