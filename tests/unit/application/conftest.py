"""Application wiring on the in-memory twins (no I/O)."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from uuid import UUID

import pytest

from adapters.crypto.credentials import AesGcmCredentialCipher
from adapters.crypto.keys import KeyRing
from adapters.crypto.sealing import AesGcmResultSealer
from adapters.memory.connection_repository import InMemoryConnectionRepository
from adapters.memory.datasource_reader import InMemoryDatasourceReader, MemoryTable
from adapters.memory.job_event_store import InMemoryJobEventStore
from adapters.memory.messaging import RecordingJobEventPublisher, RecordingWorkQueue
from adapters.memory.result_storage import InMemoryResultStorage
from application.commands.connection_input import ConnectionInput
from application.commands.register_connection import RegisterConnection
from application.commands.request_job import RequestJob
from application.commands.run_job import RunJob, RunLimits
from application.connections import ConnectionDirectory, EndpointFactory
from application.policies.emit_events import EmitJobEvents
from application.policies.follower import LogFollower
from application.policies.publish_work_orders import PublishWorkOrders
from domain.connection import Connection

MASTER_KEY = base64.b64encode(bytes(range(32))).decode()


class FakeClock:
    def __init__(self) -> None:
        self.current = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)

    def now(self) -> datetime:
        return self.current

    def advance(self, **kwargs: float) -> None:
        self.current += timedelta(**kwargs)


class CountingIds:
    def __init__(self) -> None:
        self.n = 0

    def new_id(self) -> UUID:
        self.n += 1
        return UUID(int=self.n)


@dataclass
class App:
    store: InMemoryJobEventStore
    repository: InMemoryConnectionRepository
    reader: InMemoryDatasourceReader
    storage: InMemoryResultStorage
    queue: RecordingWorkQueue
    publisher: RecordingJobEventPublisher
    clock: FakeClock
    ring: KeyRing
    request_job: RequestJob
    run_job: RunJob
    register: RegisterConnection
    dispatcher: LogFollower
    emitter: LogFollower

    async def connection(self, name: str = "pgsql", product: str = "payments") -> Connection:
        return await self.register(
            product,
            ConnectionInput(
                config_name=name,
                type="POSTGRESQL",
                host="db.local",
                port=5432,
                database_name=name,
                user_name="reader",
                password="s3cret p@ss",
            ),
        )


@pytest.fixture
def app() -> App:
    store = InMemoryJobEventStore()
    repository = InMemoryConnectionRepository()
    reader = InMemoryDatasourceReader(chunk_rows=2)
    storage = InMemoryResultStorage()
    ring = KeyRing(MASTER_KEY)
    cipher = AesGcmCredentialCipher(ring)
    clock = FakeClock()
    ids = CountingIds()
    directory = ConnectionDirectory(repository)
    endpoints = EndpointFactory(cipher)
    queue = RecordingWorkQueue()
    publisher = RecordingJobEventPublisher()
    db = reader.database("db.local", "pgsql")
    db.tables["accounts"] = MemoryTable(
        columns=[("id", "integer"), ("name", "text")],
        rows=[{"id": i, "name": f"n{i}"} for i in range(1, 6)],
    )
    db.tables["empty"] = MemoryTable(columns=[("id", "integer")])
    return App(
        store=store,
        repository=repository,
        reader=reader,
        storage=storage,
        queue=queue,
        publisher=publisher,
        clock=clock,
        ring=ring,
        request_job=RequestJob(store, directory, endpoints, reader, clock, ids),
        run_job=RunJob(
            store,
            directory,
            endpoints,
            reader,
            AesGcmResultSealer.from_ring(ring),
            storage,
            clock,
            "worker-1",
            RunLimits(retry_backoff=0.0),
        ),
        register=RegisterConnection(repository, cipher, clock, ids),
        dispatcher=LogFollower(
            name="dispatcher", store=store, handle=PublishWorkOrders(store, queue, clock)
        ),
        emitter=LogFollower(name="emitter", store=store, handle=EmitJobEvents(store, publisher)),
    )
