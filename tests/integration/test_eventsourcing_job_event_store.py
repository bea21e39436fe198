"""The job event store contract on the eventsourcing adapter: in process, SQLite and
PostgreSQL; files and servers that fail, and events that survive reopening."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
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


async def test_connections_the_database_dropped_are_replaced_without_an_error(
    pg_event_database: str,
) -> None:
    """A database restart drops every pooled connection: the API's next read and append go
    through on new connections instead of answering ``Unavailable`` once per dropped one."""
    import asyncpg

    address = PostgresAddress.from_url(pg_event_database)
    store = EventsourcingJobEventStore.for_database(
        address, schema=f"t_{uuid.uuid4().hex[:12]}", fail_fast=True
    )
    try:
        await store.open()
        job = uuid4()
        history = _full_history(job)
        await store.append(history[:1])
        assert await store.job_events(job) == history[:1]
        admin = await asyncpg.connect(pg_event_database)
        try:
            dropped = await admin.fetchval(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = $1 AND pid <> pg_backend_pid() AND application_name = ''",
                address.database,
            )
        finally:
            await admin.close()
        assert dropped >= 1
        await store.append(history[1:2])
        assert await store.job_events(job) == history[:2]
    finally:
        await store.close()


async def test_a_store_that_did_not_write_a_stream_chains_onto_it(pg_event_database: str) -> None:
    """The digest chain links an event to its predecessor even when another process wrote
    that one (the predecessor is read before sealing)."""
    from domain.audit_chain import prev_digest_of, split_sealed

    job, schema = uuid4(), f"t_{uuid.uuid4().hex[:12]}"
    address = PostgresAddress.from_url(pg_event_database)
    history = _full_history(job)
    first = EventsourcingJobEventStore.for_database(address, schema=schema)
    second = EventsourcingJobEventStore.for_database(address, schema=schema)
    try:
        await first.append(history[:1])
        await second.append(history[1:2])
        records = [r for r in await second.read_records(0, 10) if r.originator_id == str(job)]
        assert [r.version for r in records] == [1, 2]
        body_1, digest_1 = split_sealed(records[0].state)
        body_2, _ = split_sealed(records[1].state)
        assert digest_1 is not None
        assert prev_digest_of(body_1) == ""
        assert prev_digest_of(body_2) == digest_1
    finally:
        await first.close()
        await second.close()


async def test_the_log_is_read_on_the_event_loop_as_the_library_reads_it(
    pg_event_database: str,
) -> None:
    """On PostgreSQL the followers' reads of the log go through asyncpg, not the thread pool;
    they answer what the library's recorder answers."""
    address = PostgresAddress.from_url(pg_event_database)
    store = EventsourcingJobEventStore.for_database(address, schema=f"t_{uuid.uuid4().hex[:12]}")
    try:
        await store.open()
        for job in (uuid4(), uuid4()):
            await store.append(_full_history(job))
        store._executor.shutdown(wait=True)  # nothing may go through the pool from here
        read = await store.read_log(2, 3)
        store._executor = ThreadPoolExecutor(1)
        by_library = await store._run(store._read_log, 2, 3)
        assert [(e.notification_id, e.event) for e in read] == [
            (e.notification_id, e.event) for e in by_library
        ]
        assert [e.notification_id for e in read] == [3, 4, 5]
        assert await store.read_log(5, 100) == (await store._run(store._read_log, 5, 100))
    finally:
        await store.close()
