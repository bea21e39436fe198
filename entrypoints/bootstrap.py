"""The composition root: builds adapters from settings and wires the use cases."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

from adapters.common.clock import SystemClock, Uuid7Generator
from adapters.crypto.credentials import AesGcmCredentialCipher
from adapters.crypto.keys import InvalidMasterKey, KeyRing, generate_master_key
from adapters.crypto.sealing import AesGcmResultSealer
from adapters.crypto.signing import HmacMessageSigner
from adapters.datasources.registry import EngineRegistry
from adapters.eventstore.store import EventsourcingJobEventStore
from adapters.memory.rate_limiter import InMemoryTokenBucket
from adapters.memory.schema_cache import InMemorySchemaCache
from adapters.messaging.local import InProcessWorkQueue, JsonlJobEventPublisher
from adapters.messaging.rabbitmq import AioPikaJobEventPublisher, AioPikaWorkQueue, RabbitTopology
from adapters.security.guarded_reader import GuardedDatasourceReader
from adapters.security.host_guard import NetworkHostGuard
from adapters.sql.connections import SqlaConnectionRepository
from adapters.sql.job_index import SqlaJobIndex
from adapters.sql.tables import create_engine_for
from adapters.storage.filesystem import FilesystemResultStorage
from adapters.storage.s3 import S3ResultStorage, S3Settings
from application.commands.request_job import RequestJob
from application.commands.run_job import RunJob, RunLimits
from application.connections import (
    ConnectionDirectory,
    EndpointFactory,
    InternalTls,
    internal_id,
)
from application.fresh_job_index import FreshJobIndex
from application.ports.datasource_reader import DatasourceReader
from application.ports.host_guard import HostGuard
from application.ports.job_event_store import JobEventStore
from application.ports.job_index import JobIndex
from application.ports.messaging import JobEventPublisher, WorkQueue
from application.ports.rate_limiter import RateLimiter
from application.ports.result_storage import ResultStorage
from application.ports.schema_cache import SchemaCache
from application.queries.get_job import GetJob, GetJobHistory
from domain.connection import Connection, DatabaseType, SslSettings
from entrypoints.connection_settings import InternalDatasource
from entrypoints.container import ApiServices, connection_services
from entrypoints.settings import Settings, SettingsError

log = logging.getLogger("fetcher")

KEY_FILE = "master.key"


def load_key_ring(settings: Settings) -> KeyRing:
    """``APP_ENC_KEY``; on the embedded default without it, a key generated once into the data
    folder (the service says so at start)."""
    keys = settings.keys
    master = keys.master_key
    if master is None:
        if settings.database.configured or settings.broker.url or settings.storage.uses_s3:
            raise SettingsError("APP_ENC_KEY is required (base64, at least 32 bytes)")
        path = settings.data_dir / KEY_FILE
        if not path.exists():
            settings.data_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as handle:
                handle.write(generate_master_key() + "\n")
            log.warning("APP_ENC_KEY is not set: generated a master key into %s", path)
        else:
            log.warning("APP_ENC_KEY is not set: using the generated master key in %s", path)
        master = path.read_text().strip()
    try:
        return KeyRing(master, keys.version, keys.previous or None)
    except InvalidMasterKey as error:
        raise SettingsError(f"APP_ENC_KEY is invalid: {error}") from None


@dataclass(slots=True)
class Core:
    """Adapters every role shares, opened once per process."""

    settings: Settings
    ring: KeyRing
    store: JobEventStore
    directory: ConnectionDirectory
    endpoints: EndpointFactory
    reader: DatasourceReader
    index: JobIndex
    schema_cache: SchemaCache
    test_limiter: RateLimiter
    host_guard: HostGuard | None = None
    engines: frozenset[DatabaseType] = frozenset({DatabaseType.POSTGRESQL})
    clock: SystemClock = field(default_factory=SystemClock)
    ids: Uuid7Generator = field(default_factory=Uuid7Generator)

    @property
    def internal_signer(self) -> HmacMessageSigner:
        return HmacMessageSigner.from_ring(self.ring, "internal")

    @property
    def external_signer(self) -> HmacMessageSigner:
        return HmacMessageSigner.from_ring(self.ring, "external")

    def api_services(self, checks: dict | None = None) -> ApiServices:
        options = self.settings.connections
        return ApiServices(
            request_job=RequestJob(
                self.store,
                self.directory,
                self.endpoints,
                self.reader,
                self.clock,
                self.ids,
                schemas=self.schema_cache,
            ),
            get_job=GetJob(self.store),
            get_job_history=GetJobHistory(self.store),
            connections=connection_services(
                directory=self.directory,
                endpoints=self.endpoints,
                reader=self.reader,
                clock=self.clock,
                ids=self.ids,
                jobs=FreshJobIndex(self.index, self.store),
                cache=self.schema_cache,
                limiter=self.test_limiter,
                guard=self.host_guard,
                supported=self.engines,
                max_page_limit=options.max_pagination_limit,
                max_months=options.max_pagination_months,
            ),
            checks=checks or {"event_store": self.store.check},
            version=self.settings.version,
        )

    def run_job(self, storage: ResultStorage) -> RunJob:
        engine = self.settings.engine
        return RunJob(
            store=self.store,
            directory=self.directory,
            endpoints=self.endpoints,
            reader=self.reader,
            sealer=AesGcmResultSealer.from_ring(self.ring),
            storage=storage,
            clock=self.clock,
            worker_id=f"{socket.gethostname()}:{os.getpid()}",
            limits=RunLimits(
                max_result_bytes=engine.max_result_bytes,
                timeout=engine.timeout_seconds,
                parallelism=engine.parallelism,
            ),
        )


def datasource_engines() -> dict[DatabaseType, Callable[[], DatasourceReader]]:
    """The engine adapter of each database type this build can read, built on first use."""

    def postgres() -> DatasourceReader:
        from adapters.datasources.postgres import PostgresReader

        return PostgresReader()

    def mysql() -> DatasourceReader:
        from adapters.datasources.mysql import MySqlReader

        return MySqlReader()

    def sql_server() -> DatasourceReader:
        from adapters.datasources.mssql import SqlServerReader

        return SqlServerReader()

    def oracle() -> DatasourceReader:
        from adapters.datasources.oracle import OracleReader

        return OracleReader()

    def mongodb() -> DatasourceReader:
        from adapters.datasources.mongodb import MongoReader

        return MongoReader()

    return {
        DatabaseType.POSTGRESQL: postgres,
        DatabaseType.MYSQL: mysql,
        DatabaseType.SQL_SERVER: sql_server,
        DatabaseType.ORACLE: oracle,
        DatabaseType.MONGODB: mongodb,
    }


def internal_connection(datasource: InternalDatasource) -> Connection:
    """An internal datasource as a connection: deterministic id, no product, never stored."""
    return Connection(
        id=internal_id(datasource.config_name),
        product_name="",
        config_name=datasource.config_name,
        type=datasource.type,
        host=datasource.host,
        port=datasource.port,
        database_name=datasource.database,
        user_name=datasource.user,
        password=None,
        ssl=SslSettings(mode=datasource.ssl_mode) if datasource.ssl_mode else None,
        metadata=dict(datasource.options),
        internal=True,
    )


@contextlib.asynccontextmanager
async def open_core(settings: Settings) -> AsyncIterator[Core]:
    ring = load_key_ring(settings)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    database = settings.database
    store = EventsourcingJobEventStore.for_database(database.postgres or database.event_store_file)
    engine = create_engine_for(database.postgres or database.sql_file)
    try:
        await store.open()
        repository = SqlaConnectionRepository(engine)
        await repository.create_schema()
        index = SqlaJobIndex(engine)
        await index.create_schema()
        cipher = AesGcmCredentialCipher(ring)
        options = settings.connections
        internal = options.internal
        engines = datasource_engines()
        reader: DatasourceReader = EngineRegistry(engines)
        guard = NetworkHostGuard() if options.ssrf_guard else None
        if guard is not None:
            reader = GuardedDatasourceReader(reader, guard)
        yield Core(
            settings=settings,
            ring=ring,
            store=store,
            directory=ConnectionDirectory(
                repository, {d.config_name: internal_connection(d) for d in internal}
            ),
            endpoints=EndpointFactory(
                cipher,
                internal_passwords={d.config_name: d.password for d in internal},
                internal_tls={
                    d.config_name: InternalTls(d.ssl_ca, d.ssl_cert, d.ssl_key) for d in internal
                },
            ),
            reader=reader,
            index=index,
            schema_cache=InMemorySchemaCache(options.schema_cache_ttl_seconds),
            test_limiter=InMemoryTokenBucket(capacity=10, per_minute=10),
            host_guard=guard,
            engines=frozenset(engines),
        )
    finally:
        await store.close()
        await engine.dispose()


@contextlib.asynccontextmanager
async def open_storage(settings: Settings) -> AsyncIterator[ResultStorage]:
    config = settings.storage
    storage: ResultStorage
    if config.uses_s3:
        if config.bucket is None:
            raise SettingsError("OBJECT_STORAGE_BUCKET is required")
        storage = await S3ResultStorage.open(
            S3Settings(
                bucket=config.bucket,
                endpoint_url=config.endpoint,
                region=config.region,
                key_prefix=config.key_prefix,
                access_key_id=config.access_key_id,
                secret_access_key=config.secret_key,
                use_path_style=config.path_style,
            )
        )
    else:
        storage = FilesystemResultStorage(
            settings.data_dir / "objects", key_prefix=config.key_prefix
        )
    try:
        yield storage
    finally:
        await storage.close()


def topology(settings: Settings) -> RabbitTopology:
    return RabbitTopology(
        work_queue=settings.broker.work_queue, events_exchange=settings.broker.events_exchange
    )


@contextlib.asynccontextmanager
async def open_work_queue(core: Core) -> AsyncIterator[WorkQueue]:
    broker = core.settings.broker
    queue: WorkQueue
    if broker.url:
        await topology(core.settings).apply(broker.url)
        queue = await AioPikaWorkQueue.connect(broker.url, broker.work_queue, core.internal_signer)
    else:
        queue = InProcessWorkQueue(core.internal_signer, queue_name=broker.work_queue)
    try:
        yield queue
    finally:
        await queue.close()


@contextlib.asynccontextmanager
async def open_event_publisher(core: Core) -> AsyncIterator[JobEventPublisher]:
    broker = core.settings.broker
    publisher: JobEventPublisher
    if broker.url:
        await topology(core.settings).apply(broker.url)
        publisher = await AioPikaJobEventPublisher.connect(
            broker.url, broker.events_exchange, broker.cloudevents_source, core.external_signer
        )
    else:
        publisher = JsonlJobEventPublisher(
            Path(core.settings.data_dir) / "events.jsonl",
            source=broker.cloudevents_source,
            signer=core.external_signer,
            exchange=broker.events_exchange,
        )
    try:
        yield publisher
    finally:
        await publisher.close()
