"""The service wired by ``bootstrap`` on the in-memory twins (no I/O)."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from uuid import UUID

import pytest

from adapters.crypto.keys import KeyRing
from adapters.memory.connection_repository import InMemoryConnectionRepository
from adapters.memory.datasource_reader import InMemoryDatasourceReader, MemoryTable
from adapters.memory.job_event_store import InMemoryJobEventStore
from adapters.memory.job_index import InMemoryJobIndex
from adapters.memory.messaging import (
    RecordingJobEventPublisher,
    RecordingWorkConsumer,
    RecordingWorkQueue,
)
from adapters.memory.result_storage import InMemoryResultStorage
from application.connections.commands.register_connection import RegisterConnection
from application.jobs.commands.request_job import RequestJob
from application.jobs.commands.run_job import RunJob, RunLimits
from application.jobs.repository import EventSourcedJobs
from application.policies.follower import LogFollower
from domain.connection import Connection
from domain.connection_input import ConnectionInput
from domain.tenant import SINGLE_TENANT
from entrypoints.composition import Overrides, bootstrap
from entrypoints.roles import Fetcher
from entrypoints.settings import Settings

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
    fetcher: Fetcher
    store: InMemoryJobEventStore
    repository: InMemoryConnectionRepository
    reader: InMemoryDatasourceReader
    storage: InMemoryResultStorage
    queue: RecordingWorkQueue
    publisher: RecordingJobEventPublisher
    job_index: InMemoryJobIndex
    clock: FakeClock
    ids: CountingIds
    ring: KeyRing

    def overrides(self) -> Overrides:
        """This app's adapters as ``bootstrap`` overrides, to wire a variant on the same state
        (``dataclasses.replace`` changes some)."""
        return Overrides(
            key_ring=self.ring,
            store=self.store,
            connections=self.repository,
            job_index=self.job_index,
            reader=self.reader,
            storage=self.storage,
            work_queue=self.queue,
            event_publisher=self.publisher,
            work_consumer=lambda handler: RecordingWorkConsumer(self.queue, handler),
            clock=self.clock,
            ids=self.ids,
            worker_id="worker-1",
            run_limits=RunLimits(retry_backoff=0.0),
        )

    @property
    def jobs(self) -> EventSourcedJobs:
        return EventSourcedJobs(self.store)

    @property
    def request_job(self) -> RequestJob:
        return self.fetcher.api.request_job

    def schemas_unknown_at_submission(self) -> None:
        """Submissions skip the schema check, as when no datasource schema can be read at
        submission: a job naming an unknown table or field is accepted, and the worker
        fails it (the path of a table dropped after submission)."""
        self.request_job.schemas = None

    @property
    def register(self) -> RegisterConnection:
        return self.fetcher.api.connections.register

    @property
    def run_job(self) -> RunJob:
        return self.fetcher.worker.run_job

    @property
    def dispatcher(self) -> LogFollower:
        return self.fetcher.relay.dispatcher

    @property
    def emitter(self) -> LogFollower:
        return self.fetcher.relay.emitter

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
            tenant=SINGLE_TENANT,
        )


def in_memory_settings(data_dir: Path, **env: str) -> Settings:
    return Settings.from_env({"FETCHER_DATA_DIR": str(data_dir), **env})


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[App]:
    reader = InMemoryDatasourceReader(chunk_rows=2)
    db = reader.database("db.local", "pgsql")
    db.tables["accounts"] = MemoryTable(
        columns=[("id", "integer"), ("name", "text")],
        rows=[{"id": i, "name": f"n{i}"} for i in range(1, 6)],
    )
    db.tables["empty"] = MemoryTable(columns=[("id", "integer")])
    app = App(
        fetcher=Fetcher(),
        # Interleaving: tasks that run at once really race between their reads and appends.
        store=InMemoryJobEventStore(interleave=True),
        repository=InMemoryConnectionRepository(),
        reader=reader,
        storage=InMemoryResultStorage(),
        queue=RecordingWorkQueue(),
        publisher=RecordingJobEventPublisher(),
        job_index=InMemoryJobIndex(),
        clock=FakeClock(),
        ids=CountingIds(),
        ring=KeyRing(MASTER_KEY),
    )
    async with bootstrap(in_memory_settings(tmp_path), overrides=app.overrides()) as fetcher:
        app.fetcher = fetcher
        yield app
