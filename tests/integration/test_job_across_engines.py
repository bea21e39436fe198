"""One job reading PostgreSQL, MariaDB and MongoDB together, through the use cases with the real
readers: the three datasources are read in parallel into one sealed result, and when any one of
them fails the job fails as a whole and nothing is stored."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import warnings
from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit
from uuid import UUID, uuid4

import aiomysql
import asyncpg
import pytest
from pymongo import AsyncMongoClient

from adapters.crypto.credentials import AesGcmCredentialCipher
from adapters.crypto.keys import KeyRing
from adapters.crypto.sealing import AesGcmResultSealer, open_result
from adapters.datasources.mongodb.reader import MongoReader
from adapters.datasources.mysql.reader import MySqlReader
from adapters.datasources.postgres.reader import PostgresReader
from adapters.memory.connection_repository import InMemoryConnectionRepository
from adapters.memory.job_event_store import InMemoryJobEventStore
from adapters.memory.job_index import InMemoryJobIndex
from adapters.memory.result_storage import InMemoryResultStorage
from application.connections.directory import ConnectionDirectory
from application.connections.endpoints import EndpointFactory
from application.jobs.commands.request_job import RequestJob
from application.jobs.commands.run_job import RunJob, RunLimits
from application.jobs.repository import EventSourcedJobs
from application.ports.datasource_reader import DatasourceReader, PreparedReads, RowChunk
from application.ports.messaging import Settlement
from domain.connection import Connection, DatabaseType, Endpoint
from domain.job import JobClaimed, JobCompleted, JobFailed, JobRequested, JobResultStored
from domain.schema import Schema, TableRead
from domain.tenant import SINGLE_TENANT
from tests.integration.conftest import require_listening, unique_name
from tests.integration.reader_helpers import registry_of

PG_HOST = os.environ.get("FETCHER_TEST_PG_HOST", "127.0.0.1")
PG_PORT = int(os.environ.get("FETCHER_TEST_PG_PORT", "5432"))
MY_HOST = os.environ.get("FETCHER_TEST_MYSQL_HOST", "127.0.0.1")
MY_PORT = int(os.environ.get("FETCHER_TEST_MYSQL_PORT", "3306"))
MONGO_URL = os.environ.get("FETCHER_TEST_MONGO_URL", "mongodb://127.0.0.1:27018")
DATABASE = unique_name("fetcher_jobs_test")
MASTER_KEY = base64.b64encode(bytes(range(32))).decode()
SOURCE = {"source": "payments"}

ACCOUNTS = [{"id": 1, "name": "alpha"}, {"id": 2, "name": "beta"}, {"id": 3, "name": "gamma"}]
ORDERS = [{"id": 10, "total": "12.50"}, {"id": 11, "total": "0.99"}]
EVENTS = [{"_id": 100, "kind": "created"}, {"_id": 101, "kind": "paid"}]


async def _prepare_postgres() -> None:
    admin = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user="postgres", ssl=False)
    try:
        if not await admin.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", DATABASE):
            await admin.execute(f'CREATE DATABASE "{DATABASE}"')
    finally:
        await admin.close()
    conn = await asyncpg.connect(
        host=PG_HOST, port=PG_PORT, user="postgres", database=DATABASE, ssl=False
    )
    try:
        await conn.execute(
            "DROP TABLE IF EXISTS accounts, bad_dates;"
            "CREATE TABLE accounts (id integer, name text);"
            "INSERT INTO accounts VALUES (1, 'alpha'), (2, 'beta'), (3, 'gamma');"
            "CREATE TABLE bad_dates (d date);"  # a BC date cannot be read into Python
            "INSERT INTO bad_dates VALUES ('0044-03-15 BC');"
        )
    finally:
        await conn.close()


async def _prepare_mariadb() -> None:
    conn = await aiomysql.connect(host=MY_HOST, port=MY_PORT, user="root", password="")
    try:
        async with conn.cursor() as cursor:
            with warnings.catch_warnings():  # notes: database exists, unknown table
                warnings.simplefilter("ignore")
                await cursor.execute(f"CREATE DATABASE IF NOT EXISTS {DATABASE}")
                await cursor.execute(f"DROP TABLE IF EXISTS {DATABASE}.orders")
            await cursor.execute(f"CREATE TABLE {DATABASE}.orders (id INT, total DECIMAL(10,2))")
            await cursor.execute(f"INSERT INTO {DATABASE}.orders VALUES (10, 12.50), (11, 0.99)")
        await conn.commit()
    finally:
        conn.close()


async def _prepare_mongo() -> None:
    parts = urlsplit(MONGO_URL)
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(parts.hostname, parts.port)
    try:
        await client.drop_database(DATABASE)
        await client[DATABASE].events.insert_many([dict(e) for e in EVENTS])
    finally:
        await client.close()


async def _drop_all() -> None:
    admin = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user="postgres", ssl=False)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')
    finally:
        await admin.close()
    conn = await aiomysql.connect(host=MY_HOST, port=MY_PORT, user="root", password="")
    try:
        async with conn.cursor() as cursor:
            await cursor.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
    finally:
        conn.close()
    parts = urlsplit(MONGO_URL)
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(parts.hostname, parts.port)
    try:
        await client.drop_database(DATABASE)
    finally:
        await client.close()


@pytest.fixture(scope="module", autouse=True)
def databases() -> Iterator[None]:
    require_listening(f"tcp://{PG_HOST}:{PG_PORT}", "PostgreSQL")
    require_listening(f"tcp://{MY_HOST}:{MY_PORT}", "MariaDB")
    require_listening(MONGO_URL, "the MongoDB test server")
    try:
        asyncio.run(_prepare_postgres())
        asyncio.run(_prepare_mariadb())
        asyncio.run(_prepare_mongo())
        yield
    finally:
        asyncio.run(_drop_all())


class Clock:
    def now(self) -> datetime:
        return datetime.now(UTC)


class Ids:
    def new_id(self) -> UUID:
        return uuid4()


class TogetherReader(DatasourceReader):
    """Passes calls through; every extraction stream waits until ``expected`` streams have
    started, so the job only completes if its datasources are read at the same time."""

    def __init__(self, inner: DatasourceReader, expected: int) -> None:
        self.inner = inner
        self.barrier = asyncio.Barrier(expected)
        self.started: list[DatabaseType] = []

    async def test(self, endpoint: Endpoint, timeout: float) -> None:
        await self.inner.test(endpoint, timeout)

    async def discover(self, endpoint: Endpoint, scope: Sequence[str]) -> Schema:
        return await self.inner.discover(endpoint, scope)

    def prepare(self, endpoint: Endpoint, reads: Sequence[TableRead]) -> PreparedReads[Any]:
        return self.inner.prepare(endpoint, reads)

    def stream(
        self, endpoint: Endpoint, prepared: PreparedReads[Any]
    ) -> AsyncGenerator[RowChunk, None]:
        stream = self.inner.stream(endpoint, prepared)
        return self._together(endpoint, stream)

    async def _together(
        self, endpoint: Endpoint, stream: AsyncIterator[RowChunk]
    ) -> AsyncGenerator[RowChunk, None]:
        self.started.append(endpoint.type)
        try:
            async with asyncio.timeout(20):
                await self.barrier.wait()
            async for chunk in stream:
                yield chunk
        finally:
            await stream.aclose()  # type: ignore[attr-defined]


@dataclass
class App:
    repository: InMemoryConnectionRepository
    store: InMemoryJobEventStore
    storage: InMemoryResultStorage
    reader: TogetherReader
    ring: KeyRing
    cipher: AesGcmCredentialCipher
    request_job: RequestJob
    run_job: RunJob

    async def connect(self, name: str, db_type: DatabaseType, host: str, port: int, user: str,
                      password: str) -> Connection:  # fmt: skip
        now = datetime.now(UTC)
        connection = Connection(
            id=uuid4(), product_name="payments", config_name=name, type=db_type, host=host,
            port=port, database_name=DATABASE, user_name=user,
            password=self.cipher.seal(password), created_at=now, updated_at=now,
        )  # fmt: skip
        await self.repository.add(connection)
        return connection


@pytest.fixture
def app() -> Iterator[App]:
    ring = KeyRing(MASTER_KEY)
    cipher = AesGcmCredentialCipher(ring)
    repository = InMemoryConnectionRepository()
    store = InMemoryJobEventStore()
    storage = InMemoryResultStorage()
    # Without pools: each test runs on its own event loop, which a kept connection would outlive.
    engines = registry_of(
        {
            DatabaseType.POSTGRESQL: PostgresReader(pool_size=0),
            DatabaseType.MYSQL: MySqlReader(pool_size=0),
            DatabaseType.MONGODB: MongoReader(connect_timeout=2),
        }
    )
    reader = TogetherReader(engines, expected=3)
    directory = ConnectionDirectory(repository)
    endpoints = EndpointFactory(cipher)
    jobs = EventSourcedJobs(store)
    yield App(
        repository=repository, store=store, storage=storage, reader=reader, ring=ring,
        cipher=cipher,
        request_job=RequestJob(jobs, directory, endpoints, reader, Clock(), Ids()),
        run_job=RunJob(
            jobs, directory, endpoints, reader, AesGcmResultSealer.from_ring(ring), storage,
            Clock(), "worker-1", RunLimits(retry_backoff=0.0, attempts=1, timeout=60),
            leases=InMemoryJobIndex(),
        ),
    )  # fmt: skip


async def _three_connections(app: App) -> dict[str, Connection]:
    mongo = urlsplit(MONGO_URL)
    return {
        "pg_main": await app.connect(
            "pg_main", DatabaseType.POSTGRESQL, PG_HOST, PG_PORT, "postgres", "unused"
        ),
        "maria_main": await app.connect(
            "maria_main", DatabaseType.MYSQL, MY_HOST, MY_PORT, "root", ""
        ),
        "mongo_main": await app.connect(
            "mongo_main", DatabaseType.MONGODB, mongo.hostname or "127.0.0.1",
            mongo.port or 27017, "", "",
        ),
    }  # fmt: skip


MAPPED = {
    "pg_main": {"public.accounts": ["id", "name"]},
    "maria_main": {"orders": ["*"]},
    "mongo_main": {"events": ["_id", "kind"]},
}


async def test_one_job_reads_three_engines_in_parallel_into_one_result(app: App) -> None:
    await _three_connections(app)
    job = (await app.request_job(MAPPED, None, SOURCE, tenant=SINGLE_TENANT)).job
    assert await app.run_job(job.id, tenant=SINGLE_TENANT) is Settlement.ACK
    events = await app.store.job_events(job.id)
    assert [type(e) for e in events] == [JobRequested, JobClaimed, JobResultStored, JobCompleted]
    assert sorted(app.reader.started, key=lambda t: t.value) == [
        DatabaseType.MONGODB, DatabaseType.MYSQL, DatabaseType.POSTGRESQL,
    ]  # fmt: skip
    stored = events[2]
    assert stored.row_count == 7
    keys = app.ring.current
    text = open_result(app.storage.objects[stored.path], keys.storage, keys.external_hmac, None)
    assert json.loads(text) == {
        "maria_main": {"orders": ORDERS},
        "mongo_main": {"events": EVENTS},
        "pg_main": {"accounts": ACCOUNTS},
    }
    assert list(json.loads(text)) == ["maria_main", "mongo_main", "pg_main"]


async def test_filters_apply_on_each_engine(app: App) -> None:
    await _three_connections(app)
    filters = {
        "pg_main": {"accounts": {"id": {"gte": [2]}}},
        "maria_main": {"orders": {"total": {"lt": ["1"]}}},
        "mongo_main": {"events": {"kind": {"like": ["pa%"]}}},
    }
    job = (await app.request_job(MAPPED, filters, SOURCE, tenant=SINGLE_TENANT)).job
    await app.run_job(job.id, tenant=SINGLE_TENANT)
    *_, stored, completed = await app.store.job_events(job.id)
    assert isinstance(completed, JobCompleted)
    keys = app.ring.current
    text = open_result(app.storage.objects[stored.path], keys.storage, keys.external_hmac, None)
    assert json.loads(text) == {
        "maria_main": {"orders": [ORDERS[1]]},
        "mongo_main": {"events": [EVENTS[1]]},
        "pg_main": {"accounts": ACCOUNTS[1:]},
    }


async def _assert_failed_with_nothing_stored(app: App, job_id: UUID) -> JobFailed:
    *_, last = await app.store.job_events(job_id)
    assert isinstance(last, JobFailed)
    assert app.storage.objects == {}
    assert app.storage.pending_uploads == 0
    return last


async def test_a_datasource_failing_mid_stream_fails_the_whole_job(app: App) -> None:
    await _three_connections(app)
    mapped = {**MAPPED, "pg_main": {"accounts": ["id"], "bad_dates": ["d"]}}
    job = (await app.request_job(mapped, None, SOURCE, tenant=SINGLE_TENANT)).job
    assert await app.run_job(job.id, tenant=SINGLE_TENANT) is Settlement.ACK
    failed = await _assert_failed_with_nothing_stored(app, job.id)
    assert failed.error == "engine extraction: engine: [unavailable] failed to query datasource"
    assert len(app.reader.started) == 3  # the others were being read when it failed


async def test_a_datasource_unreachable_at_run_time_fails_the_whole_job(app: App) -> None:
    connections = await _three_connections(app)
    job = (await app.request_job(MAPPED, None, SOURCE, tenant=SINGLE_TENANT)).job
    mongo = connections["mongo_main"]
    moved = replace(mongo, port=1, version=mongo.version + 1, updated_at=datetime.now(UTC))
    await app.repository.update(moved)
    assert await app.run_job(job.id, tenant=SINGLE_TENANT) is Settlement.ACK
    failed = await _assert_failed_with_nothing_stored(app, job.id)
    assert failed.error.endswith("[unavailable] failed to connect to datasource")
    assert app.reader.started == []  # planning failed: no datasource was read
