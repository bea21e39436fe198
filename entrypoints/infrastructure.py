"""What is opened from settings: the master key, the service's database, result storage and
the broker. Each has an embedded twin for the default without configuration."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import AsyncIterator

from adapters.audit.checkpoints import SqlCheckpointStore
from adapters.crypto.audit_signing import AuditKeys, InvalidAuditKey
from adapters.crypto.keys import InvalidMasterKey, KeyRing, generate_master_key
from adapters.crypto.signing import HmacMessageSigner
from adapters.eventstore.listener import PostgresLogWatch
from adapters.eventstore.store import EventsourcingJobEventStore
from adapters.messaging.local import InProcessWorkQueue, JsonlJobEventPublisher
from adapters.messaging.rabbitmq import AioPikaJobEventPublisher, AioPikaWorkQueue, RabbitTopology
from adapters.messaging.rabbitmq_consumer import RabbitWorkConsumer
from adapters.messaging.rabbitmq_probe import RabbitBrokerProbe
from adapters.sql.connection_repository import SqlaConnectionRepository
from adapters.sql.job_index import SqlaJobIndex
from adapters.sql.tables import create_engine_for
from adapters.storage.filesystem import FilesystemResultStorage
from adapters.storage.s3 import S3ResultStorage, S3Settings
from application.ports.connection_repository import ConnectionRepository
from application.ports.job_event_store import JobEventStore
from application.ports.job_index import JobIndex
from application.ports.log_watch import AnyLogWatch, LogWatch
from application.ports.messaging import JobEventPublisher, WorkConsumer, WorkHandler, WorkQueue
from application.ports.result_storage import ResultStorage
from application.readiness import Check, Dependency
from domain.errors import Unavailable
from entrypoints.settings import Settings, SettingsError

log = logging.getLogger("fetcher")

KEY_FILE = "master.key"


@contextlib.asynccontextmanager
async def open_event_store(
    settings: Settings, *, fail_fast: bool = False
) -> AsyncIterator[JobEventStore]:
    """The event store on PostgreSQL, or on its SQLite file; its tables are created now.
    ``fail_fast``: for a process that answers requests (an outage is ``Unavailable`` within
    seconds instead of after the library's retries)."""
    database = settings.database
    store = EventsourcingJobEventStore.for_database(
        database.postgres or database.event_store_file, fail_fast=fail_fast
    )
    try:
        try:
            await store.open()
        except Unavailable as error:
            raise Unavailable(
                "the event store's database (FETCHER_DATABASE_URL) cannot be used"
            ) from error
        yield store
    finally:
        await store.close()


def log_watch_for(settings: Settings, store: JobEventStore) -> LogWatch | None:
    """How the followers hear the log grow in other processes: on PostgreSQL, by listening on
    the channel the event store notifies when it inserts; elsewhere there is no other process
    to hear (the embedded default wakes its followers in-process, ``growth_watch_for``)."""
    database = settings.database.postgres
    if database is None or not isinstance(store, EventsourcingJobEventStore):
        return None
    channel = store.notification_channel()
    return None if channel is None else PostgresLogWatch(database, channel)


def growth_watch_for(store: JobEventStore, others: LogWatch | None) -> LogWatch:
    """How the followers hear the log grow: this process's appends as the store commits them,
    and ``others`` (``log_watch_for``) for the appends of other processes."""
    return store.appended if others is None else AnyLogWatch((store.appended, others))


@contextlib.asynccontextmanager
async def open_checkpoint_store(settings: Settings) -> AsyncIterator[SqlCheckpointStore]:
    """The audit checkpoints, in the event store's database; the table is created now."""
    database = settings.database
    checkpoints = SqlCheckpointStore.for_database(database.postgres or database.event_store_file)
    try:
        try:
            await checkpoints.create_schema()
        except Unavailable as error:
            raise Unavailable(
                "the audit checkpoints' database (FETCHER_DATABASE_URL) cannot be used"
            ) from error
        yield checkpoints
    finally:
        await checkpoints.close()


def load_audit_keys(settings: Settings, ring: KeyRing) -> AuditKeys:
    """The checkpoint signer (``FETCHER_AUDIT_SIGNING_KEY`` or derived from the current master
    key) and the public keys of every key version."""
    try:
        return AuditKeys.from_ring(ring, settings.audit.signing_key)
    except InvalidAuditKey as error:
        raise SettingsError(f"FETCHER_AUDIT_SIGNING_KEY is invalid: {error}") from None


@contextlib.asynccontextmanager
async def open_sql_adapters(
    settings: Settings,
    connections: ConnectionRepository | None = None,
    job_index: JobIndex | None = None,
) -> AsyncIterator[tuple[ConnectionRepository, JobIndex]]:
    """The connection repository and the job index: those given, the others on one engine (one
    pool) for the service's database, their tables created now."""
    if connections is not None and job_index is not None:
        yield connections, job_index
        return
    database = settings.database
    engine = create_engine_for(database.postgres or database.sql_file)
    try:
        if connections is None:
            repository = SqlaConnectionRepository(engine)
            await repository.create_schema()
            connections = repository
        if job_index is None:
            index = SqlaJobIndex(engine)
            await index.create_schema()
            job_index = index
        yield connections, job_index
    finally:
        await engine.dispose()


def _s3_settings(settings: Settings) -> S3Settings:
    config = settings.storage
    if config.bucket is None:
        raise SettingsError("OBJECT_STORAGE_BUCKET is required")
    return S3Settings(
        bucket=config.bucket,
        endpoint_url=config.endpoint,
        region=config.region,
        key_prefix=config.key_prefix,
        access_key_id=config.access_key_id,
        secret_access_key=config.secret_key,
        use_path_style=config.path_style,
    )


async def reach_result_storage(settings: Settings) -> None:
    """Checks the result bucket over a client of its own (for a process still starting)."""
    storage = await S3ResultStorage.open(_s3_settings(settings))
    try:
        await storage.check()
    finally:
        await storage.close()


@contextlib.asynccontextmanager
async def open_result_storage(settings: Settings) -> AsyncIterator[ResultStorage]:
    config = settings.storage
    storage: ResultStorage
    if config.uses_s3:
        storage = await S3ResultStorage.open(_s3_settings(settings))
    else:
        storage = FilesystemResultStorage(
            settings.data_dir / "objects", key_prefix=config.key_prefix
        )
    try:
        yield storage
    finally:
        await storage.close()


def broker_topology(settings: Settings) -> RabbitTopology:
    return RabbitTopology(
        work_queue=settings.broker.work_queue, events_exchange=settings.broker.events_exchange
    )


async def declare_broker_topology(settings: Settings) -> None:
    """Declares the exchanges and queues (idempotent) when a broker is configured."""
    if settings.broker.url:
        await broker_topology(settings).apply(settings.broker.url)


def database_dependency(settings: Settings, store: JobEventStore) -> Dependency:
    """The service's database, through the event store (the SQL adapters share it):
    ``postgres``, or ``sqlite`` on the embedded default."""
    name = "postgres" if settings.database.postgres is not None else "sqlite"
    return Dependency(name, store.check)


def broker_dependency(settings: Settings, *checks: Check) -> Dependency | None:
    """The broker, through ``checks`` (the publishers' own, or a ``RabbitBrokerProbe``'s):
    ``rabbitmq``, or ``local_broker`` for the in-process queue and events file of the
    embedded default (with nothing to check there, none)."""
    if not checks:
        return None
    url = settings.broker.url
    if url is None:
        return Dependency("local_broker", _all(checks))
    return Dependency("rabbitmq", _all(checks), tls=url.startswith("amqps:"))


@contextlib.asynccontextmanager
async def open_broker_probe(settings: Settings) -> AsyncIterator[RabbitBrokerProbe | None]:
    """For a process that publishes nothing: a probe of the broker on a connection of its
    own, when a broker is configured."""
    url = settings.broker.url
    if url is None:
        yield None
        return
    probe = await RabbitBrokerProbe.connect(url, broker_topology(settings))
    try:
        yield probe
    finally:
        await probe.close()


def storage_dependency(settings: Settings, storage: ResultStorage) -> Dependency:
    """Result storage: ``s3`` (its bucket), or ``local_storage`` for the results folder."""
    config = settings.storage
    if not config.uses_s3:
        return Dependency("local_storage", storage.check)
    endpoint = config.endpoint
    return Dependency("s3", storage.check, tls=endpoint is None or endpoint.startswith("https:"))


def _all(checks: tuple[Check, ...]) -> Check:
    async def check() -> None:
        for each in checks:
            await each()

    return check


@contextlib.asynccontextmanager
async def open_work_queue(
    settings: Settings, signer: HmacMessageSigner
) -> AsyncIterator[WorkQueue]:
    broker = settings.broker
    queue: WorkQueue
    if broker.url:
        queue = await AioPikaWorkQueue.connect(broker.url, broker.work_queue, signer)
    else:
        queue = InProcessWorkQueue(signer, queue_name=broker.work_queue)
    try:
        yield queue
    finally:
        await queue.close()


@contextlib.asynccontextmanager
async def open_event_publisher(
    settings: Settings, signer: HmacMessageSigner
) -> AsyncIterator[JobEventPublisher]:
    broker = settings.broker
    publisher: JobEventPublisher
    if broker.url:
        publisher = await AioPikaJobEventPublisher.connect(
            broker.url, broker.events_exchange, broker.cloudevents_source, signer
        )
    else:
        publisher = JsonlJobEventPublisher(
            settings.data_dir / "events.jsonl",
            source=broker.cloudevents_source,
            signer=signer,
            exchange=broker.events_exchange,
        )
    try:
        yield publisher
    finally:
        await publisher.close()


@contextlib.asynccontextmanager
async def open_rabbit_consumer(
    settings: Settings, signer: HmacMessageSigner, handler: WorkHandler
) -> AsyncIterator[WorkConsumer]:
    broker = settings.broker
    if not broker.url:
        raise SettingsError("RABBITMQ_URL is required")
    consumer = await RabbitWorkConsumer.connect(
        broker.url, broker.work_queue, signer, handler, prefetch=broker.workers
    )
    try:
        yield consumer
    finally:
        await consumer.stop()


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
