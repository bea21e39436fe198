"""The HTTP API on real adapters (a SQL repository, real engine readers), wired by
``bootstrap``, for the connection integration tests. Job routes run on the in-memory event
store."""

from __future__ import annotations

import base64
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from adapters.common.postgres import PostgresAddress
from adapters.crypto.keys import KeyRing
from adapters.datasources.mysql.reader import MySqlReader
from adapters.datasources.postgres.reader import PostgresReader
from adapters.memory.job_event_store import InMemoryJobEventStore
from adapters.memory.job_index import InMemoryJobIndex
from adapters.memory.messaging import RecordingWorkConsumer, RecordingWorkQueue
from adapters.memory.result_storage import InMemoryResultStorage
from adapters.sql.connection_repository import SqlaConnectionRepository
from adapters.sql.tables import create_engine_for
from application.jobs.commands.run_job import RunJob, RunLimits
from application.ports.datasource_reader import DatasourceReader
from domain.connection import DatabaseType
from entrypoints.composition import Overrides, bootstrap
from entrypoints.http.app import create_app
from entrypoints.roles import ApiServices, Role
from entrypoints.settings import Settings
from tests.integration.reader_helpers import registry_of

MASTER_KEY = base64.b64encode(bytes(range(32))).decode()


@dataclass
class Api:
    client: httpx.AsyncClient
    repository: SqlaConnectionRepository
    services: ApiServices
    run_job: RunJob
    """The worker's job runner, storing results in ``storage``."""
    storage: InMemoryResultStorage


def repository_from_url(url: str | None, sqlite_path: Path) -> SqlaConnectionRepository:
    """A repository on an engine of its own (disposed of with it), as a separate process
    would have: PostgreSQL for a URL, else the SQLite file."""
    database = PostgresAddress.from_url(url) if url else sqlite_path
    return SqlaConnectionRepository(create_engine_for(database), owns_engine=True)


def default_reader() -> DatasourceReader:
    """Without connection pools: the tests' apps are not closed through bootstrap, and a kept
    connection would outlive the test's event loop."""
    return registry_of(
        {
            DatabaseType.POSTGRESQL: PostgresReader(connect_timeout=5, pool_size=0),
            DatabaseType.MYSQL: MySqlReader(connect_timeout=5, pool_size=0),
        }
    )


def in_loop_client(app: object) -> httpx.AsyncClient:
    """An HTTP client calling the ASGI app in the test's own event loop, so pooled database
    connections opened by the test and by the app belong to one loop."""
    transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
    return httpx.AsyncClient(transport=transport, base_url="http://fetcher.test", timeout=30)


@contextlib.asynccontextmanager
async def connections_api(
    database_url: str | None,
    sqlite_path: Path,
    *,
    ring: KeyRing | None = None,
    reader: DatasourceReader | None = None,
) -> AsyncIterator[Api]:
    """The API and the worker as ``bootstrap`` wires them, on a connection repository of its
    own (the database's, or the SQLite file), in-memory jobs and results."""
    repository = repository_from_url(database_url, sqlite_path)
    await repository.create_schema()
    settings = Settings.from_env({"FETCHER_DATA_DIR": str(sqlite_path.parent / "data")})
    storage, queue = InMemoryResultStorage(), RecordingWorkQueue()
    try:
        async with bootstrap(
            settings,
            roles={Role.API, Role.WORKER},
            overrides=Overrides(
                key_ring=ring or KeyRing(MASTER_KEY),
                store=InMemoryJobEventStore(),
                connections=repository,
                job_index=InMemoryJobIndex(),
                reader=reader or default_reader(),
                storage=storage,
                work_consumer=lambda handler: RecordingWorkConsumer(queue, handler),
                run_limits=RunLimits(retry_backoff=0.0),
            ),
        ) as fetcher:
            async with in_loop_client(create_app(fetcher.api)) as client:
                yield Api(client, repository, fetcher.api, fetcher.worker.run_job, storage)
    finally:
        await repository.close()
