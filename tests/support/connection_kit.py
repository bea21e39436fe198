"""The connection use cases wired on the in-memory twins of the ``app`` fixture."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from adapters.memory.job_index import InMemoryJobIndex
from adapters.memory.rate_limiter import InMemoryTokenBucket
from adapters.memory.schema_cache import InMemorySchemaCache
from application.connections.directory import ConnectionDirectory, internal_id
from application.connections.endpoints import EndpointFactory
from application.ports.credential_cipher import CredentialCipher
from application.ports.datasource_reader import DatasourceReader, PreparedReads, RowChunk
from application.ports.host_guard import HostGuard
from domain.connection import Connection, DatabaseType, Endpoint
from domain.connection_input import ConnectionInput
from domain.errors import FetcherError
from domain.schema import Schema, TableRead
from entrypoints.composition.api import connection_services
from entrypoints.roles import ConnectionServices


class Ticks:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.value = 1000.0

    def __call__(self) -> float:
        return self.value


@dataclass
class ScriptedReader(DatasourceReader):
    """Delegates to the in-memory reader, unless an error is scripted for a method; records
    the endpoints it was handed and counts discoveries."""

    inner: DatasourceReader
    errors: dict[str, BaseException] = field(default_factory=dict)
    endpoints: list[Endpoint] = field(default_factory=list)
    discoveries: int = 0

    async def test(self, endpoint: Endpoint, timeout: float) -> None:
        self.endpoints.append(endpoint)
        if "test" in self.errors:
            raise self.errors["test"]
        await self.inner.test(endpoint, timeout)

    async def discover(self, endpoint: Endpoint, scope: Sequence[str]) -> Schema:
        self.endpoints.append(endpoint)
        self.discoveries += 1
        if "discover" in self.errors:
            raise self.errors["discover"]
        return await self.inner.discover(endpoint, scope)

    def prepare(self, endpoint: Endpoint, reads: Sequence[TableRead]) -> PreparedReads[Any]:
        return self.inner.prepare(endpoint, reads)

    def stream(
        self, endpoint: Endpoint, prepared: PreparedReads[Any]
    ) -> AsyncGenerator[RowChunk, None]:
        return self.inner.stream(endpoint, prepared)


@dataclass
class Kit:
    app: object
    services: ConnectionServices
    jobs: InMemoryJobIndex
    cache: InMemorySchemaCache
    reader: ScriptedReader
    ticks: Ticks
    limiter: InMemoryTokenBucket

    async def project_jobs(self) -> None:
        store = self.app.store  # type: ignore[attr-defined]
        await self.jobs.project(await store.read_log(0, 10_000))


def make_kit(
    app,
    *,
    internal: dict[str, Connection] | None = None,
    guard: HostGuard | None = None,
    cipher: CredentialCipher | None = None,
) -> Kit:
    ticks = Ticks()
    reader = ScriptedReader(app.reader)
    directory = ConnectionDirectory(app.repository, internal or {})
    endpoints = EndpointFactory(cipher or app.request_job.endpoints.cipher)
    jobs = InMemoryJobIndex()
    cache = InMemorySchemaCache(300, now=ticks)
    limiter = InMemoryTokenBucket(now=ticks)
    services = connection_services(
        directory=directory,
        endpoints=endpoints,
        reader=reader,
        clock=app.clock,
        ids=app.register.ids,
        jobs=jobs,
        cache=cache,
        limiter=limiter,
        guard=guard,
    )
    return Kit(app, services, jobs, cache, reader, ticks, limiter)


def pg_input(name: str = "pgsql", **changes: object) -> ConnectionInput:
    values: dict[str, object] = {
        "config_name": name,
        "type": "POSTGRESQL",
        "host": "db.local",
        "port": 5432,
        "database_name": "pgsql",
        "user_name": "reader",
        "password": "s3cret p@ss:/?#",
    }
    values.update(changes)
    return ConnectionInput(**values)  # type: ignore[arg-type]


def internal_connection(
    name: str,
    kind: DatabaseType = DatabaseType.POSTGRESQL,
    *,
    host: str = "ledger.db",
    database: str = "ledger",
) -> Connection:
    """An internal datasource (configured, never stored) named ``name``."""
    return Connection(
        id=internal_id(name),
        product_name="",
        config_name=name,
        type=kind,
        host=host,
        port=5432,
        database_name=database,
        user_name="ledger",
        password=None,
        internal=True,
    )


async def raises(
    awaitable: Awaitable[object], code: str, message: str | None = None
) -> FetcherError:
    """Awaits ``awaitable``, which must fail with ``code`` (and ``message`` when given)."""
    with pytest.raises(FetcherError) as caught:
        await awaitable
    assert caught.value.code == code, (caught.value.code, caught.value.message)
    if message is not None:
        assert caught.value.message == message
    return caught.value
