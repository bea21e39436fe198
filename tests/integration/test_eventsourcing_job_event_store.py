"""The job event store contract on the eventsourcing adapter: in process, SQLite and
PostgreSQL; files and servers that fail, and events that survive reopening."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest

from adapters.common.postgres import PostgresAddress
from adapters.eventstore.store import EventsourcingJobEventStore, event_store_for
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
        store = event_store_for(tmp_path / "data" / "events.db")
        await store.open()
        yield store
        await store.close()

    async def test_unopenable_file_raises_unavailable(self, tmp_path: Path) -> None:
        (tmp_path / "a-directory.db").mkdir()
        store = event_store_for(tmp_path / "a-directory.db")
        try:
            with pytest.raises(Unavailable):
                await store.check()
        finally:
            await store.close()

    async def test_events_survive_reopening_the_file(self, tmp_path: Path) -> None:
        job = uuid4()
        first = event_store_for(tmp_path / "reopen.db")
        await first.append(_full_history(job))
        await first.advance("projection", 2)
        await first.close()

        second = event_store_for(tmp_path / "reopen.db")
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
        store = event_store_for(
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
        store = event_store_for(
            PostgresAddress.from_url(pg_event_database), schema=f"t_{uuid.uuid4().hex[:12]}"
        )
        await store.open()
        yield store
        await store.close()

    async def test_events_survive_reopening_the_store(self, pg_event_database: str) -> None:
        job, schema = uuid4(), f"t_{uuid.uuid4().hex[:12]}"
        first = event_store_for(PostgresAddress.from_url(pg_event_database), schema=schema)
        await first.append(_full_history(job))
        await first.advance("projection", 2)
        await first.close()

        second = event_store_for(PostgresAddress.from_url(pg_event_database), schema=schema)
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
        store = event_store_for(
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
    store = event_store_for(address, schema=f"t_{uuid.uuid4().hex[:12]}", fail_fast=True)
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
                "WHERE datname = $1 AND pid <> pg_backend_pid() "
                "AND application_name = 'fetcher'",
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
    that one (the predecessor is read before linking)."""
    from domain.audit_chain import prev_digest_of, split_linked

    job, schema = uuid4(), f"t_{uuid.uuid4().hex[:12]}"
    address = PostgresAddress.from_url(pg_event_database)
    history = _full_history(job)
    first = event_store_for(address, schema=schema)
    second = event_store_for(address, schema=schema)
    try:
        await first.append(history[:1])
        await second.append(history[1:2])
        records = [r for r in await second.read_records(0, 10) if r.originator_id == str(job)]
        assert [r.version for r in records] == [1, 2]
        body_1, digest_1 = split_linked(records[0].state)
        body_2, _ = split_linked(records[1].state)
        assert digest_1 is not None
        assert prev_digest_of(body_1) == ""
        assert prev_digest_of(body_2) == digest_1
    finally:
        await first.close()
        await second.close()


def _library_recorder(address: PostgresAddress, schema: str) -> tuple[Any, Any]:
    """The eventsourcing library's own PostgreSQL recorder and mapper on ``schema``, as the
    store before Fetcher owned its tables opened it."""
    from eventsourcing.persistence import InfrastructureFactory

    from adapters.eventstore.mapping import new_mapper

    factory: Any = InfrastructureFactory.construct(
        {
            "PERSISTENCE_MODULE": "eventsourcing.postgres",
            "POSTGRES_DBNAME": address.database,
            "POSTGRES_HOST": address.host,
            "POSTGRES_PORT": str(address.port),
            "POSTGRES_USER": address.user,
            "POSTGRES_PASSWORD": address.password,
            "POSTGRES_SCHEMA": schema,
            "CREATE_TABLE": "y",
        }
    )
    return factory, new_mapper()


async def test_a_database_the_library_wrote_is_read_and_written_in_place(
    pg_event_database: str,
) -> None:
    """Fetcher's DDL is the library's 9.5 layout: a store the library's recorder created and
    wrote (events, the log, a follower's position) is read as it is, appended to, and what the
    store writes reads back through the library byte for byte."""
    import asyncio

    from eventsourcing.persistence import Tracking

    address = PostgresAddress.from_url(pg_event_database)
    schema = f"t_{uuid.uuid4().hex[:12]}"
    async with asyncpg_admin(pg_event_database) as admin:
        await admin.execute(f'CREATE SCHEMA "{schema}"')
    old_job, new_job = uuid4(), uuid4()
    factory, mapper = _library_recorder(address, schema)
    try:
        recorder = factory.process_recorder()

        def write_as_the_library() -> None:
            recorder.insert_events([mapper.to_stored_event(e) for e in _full_history(old_job)])
            recorder.insert_tracking(Tracking("projection", 3))

        await asyncio.to_thread(write_as_the_library)
        store = event_store_for(address, schema=schema)
        try:
            await store.open()
            assert await store.job_events(old_job) == _full_history(old_job)
            assert await store.position("projection") == 3
            assert not await store.advance("projection", 2)
            assert [e.event for e in await store.read_log(0, 100)] == _full_history(old_job)
            await store.append(_full_history(new_job))
            assert await store.last_notification_id() == 2 * len(_full_history(old_job))
        finally:
            await store.close()

        def read_as_the_library() -> list[Any]:
            return [mapper.to_domain_event(s) for s in recorder.select_events(new_job)]

        assert await asyncio.to_thread(read_as_the_library) == _full_history(new_job)
        assert await asyncio.to_thread(recorder.max_tracking_id, "projection") == 3
    finally:
        factory.close()


@contextlib.asynccontextmanager
async def asyncpg_admin(url: str) -> AsyncIterator[Any]:
    import asyncpg

    connection = await asyncpg.connect(url)
    try:
        yield connection
    finally:
        await connection.close()


async def test_processes_starting_together_create_the_tables_once(pg_event_database: str) -> None:
    """Several stores opening one new schema at the same moment all open (the DDL is
    serialised), and each sees the others' events."""
    import asyncio

    address = PostgresAddress.from_url(pg_event_database)
    schema = f"t_{uuid.uuid4().hex[:12]}"
    stores = [event_store_for(address, schema=schema) for _ in range(4)]
    try:
        await asyncio.gather(*(store.open() for store in stores))
        jobs = [uuid4() for _ in stores]
        await asyncio.gather(
            *(s.append(_full_history(j)) for s, j in zip(stores, jobs, strict=True))
        )
        for store in stores:
            assert {e.event.originator_id for e in await store.read_log(0, 100)} == set(jobs)
    finally:
        for store in stores:
            await store.close()
