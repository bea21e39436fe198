"""The HTTP API on real adapters (a SQL repository, real engine readers), for the connection
integration tests. Job routes run on the in-memory event store."""

from __future__ import annotations

import base64
import contextlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx

from adapters.common.clock import SystemClock, Uuid7Generator
from adapters.common.postgres import PostgresAddress
from adapters.crypto.credentials import AesGcmCredentialCipher
from adapters.crypto.keys import KeyRing
from adapters.datasources.mysql import MySqlReader
from adapters.datasources.postgres import PostgresReader
from adapters.datasources.registry import EngineRegistry
from adapters.memory.job_event_store import InMemoryJobEventStore
from adapters.memory.job_index import InMemoryJobIndex
from adapters.memory.rate_limiter import InMemoryTokenBucket
from adapters.memory.schema_cache import InMemorySchemaCache
from adapters.sql.connections import SqlaConnectionRepository
from adapters.sql.tables import create_engine_for
from application.commands.request_job import RequestJob
from application.connections import ConnectionDirectory, EndpointFactory
from application.ports.datasource_reader import DatasourceReader
from application.queries.get_job import GetJob, GetJobHistory
from domain.connection import DatabaseType
from entrypoints.container import ApiServices, connection_services
from entrypoints.http.app import create_app

MASTER_KEY = base64.b64encode(bytes(range(32))).decode()


@dataclass
class Api:
    client: httpx.AsyncClient
    repository: SqlaConnectionRepository
    services: ApiServices


def repository_from_url(url: str | None, sqlite_path: Path) -> SqlaConnectionRepository:
    """A repository on an engine of its own (disposed of with it), as a separate process
    would have: PostgreSQL for a URL, else the SQLite file."""
    database = PostgresAddress.from_url(url) if url else sqlite_path
    return SqlaConnectionRepository(create_engine_for(database), owns_engine=True)


def default_reader() -> DatasourceReader:
    return EngineRegistry.of(
        {
            DatabaseType.POSTGRESQL: PostgresReader(connect_timeout=5),
            DatabaseType.MYSQL: MySqlReader(connect_timeout=5),
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
    internal_passwords: Mapping[str, str] | None = None,
) -> AsyncIterator[Api]:
    repository = repository_from_url(database_url, sqlite_path)
    await repository.create_schema()
    cipher = AesGcmCredentialCipher(ring or KeyRing(MASTER_KEY))
    directory = ConnectionDirectory(repository)
    endpoints = EndpointFactory(cipher, internal_passwords=internal_passwords or {})
    reader = reader or default_reader()
    clock, ids = SystemClock(), Uuid7Generator()
    store = InMemoryJobEventStore()
    services = ApiServices(
        request_job=RequestJob(store, directory, endpoints, reader, clock, ids),
        get_job=GetJob(store),
        get_job_history=GetJobHistory(store),
        connections=connection_services(
            directory=directory,
            endpoints=endpoints,
            reader=reader,
            clock=clock,
            ids=ids,
            jobs=InMemoryJobIndex(),
            cache=InMemorySchemaCache(),
            limiter=InMemoryTokenBucket(),
        ),
    )
    try:
        async with in_loop_client(create_app(services)) as client:
            yield Api(client, repository, services)
    finally:
        await repository.close()
