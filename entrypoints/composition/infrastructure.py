"""What is opened from settings, as typed bundles: the master key, the service's database
(event log and SQL tables), result storage, the broker and the datasource engines. Each has an
embedded twin for the default without configuration."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine

from adapters.audit.checkpoints import SqlCheckpointStore
from adapters.common.clock import SystemClock
from adapters.crypto.audit_signing import AuditKeys, InvalidAuditKey
from adapters.crypto.credentials import AesGcmCredentialCipher
from adapters.crypto.keys import InvalidMasterKey, KeyRing, generate_master_key
from adapters.crypto.signing import HmacMessageSigner
from adapters.datasources.registry import EngineRegistry
from adapters.eventstore.listener import PostgresLogWatch
from adapters.eventstore.store import EventStore, event_store_for
from adapters.messaging.local import InProcessWorkQueue, JsonlJobEventPublisher
from adapters.messaging.rabbitmq import AioPikaJobEventPublisher, AioPikaWorkQueue
from adapters.messaging.rabbitmq_consumer import RabbitWorkConsumer
from adapters.messaging.rabbitmq_probe import RabbitBrokerProbe
from adapters.messaging.rabbitmq_topology import RabbitTopology
from adapters.messaging.unroutable import UnroutableMessages
from adapters.metrics.prometheus import PrometheusMetrics
from adapters.security.guarded_reader import GuardedDatasourceReader
from adapters.security.host_guard import NetworkHostGuard
from adapters.sql.connection_repository import SqlaConnectionRepository
from adapters.sql.job_index import SqlaJobIndex
from adapters.sql.tables import create_engine_for
from adapters.storage.filesystem import FilesystemResultStorage
from adapters.storage.s3 import S3ResultStorage, S3Settings
from application.connections.directory import ConnectionDirectory, internal_id
from application.connections.endpoints import EndpointFactory
from application.errors import PortError
from application.ports.audit import AuditLog, CheckpointStore, WitnessStore
from application.ports.clock import Clock
from application.ports.connection_repository import ConnectionRepository
from application.ports.datasource_reader import DatasourceReader
from application.ports.host_guard import HostGuard
from application.ports.job_event_store import JobEventStore
from application.ports.job_progress import JobProgressStore
from application.ports.log_watch import LogWatch
from application.ports.messaging import JobEventPublisher, WorkConsumer, WorkHandler, WorkQueue
from application.ports.metrics import RelayMetrics
from application.ports.result_storage import ResultStorage
from application.ports.tracer import Tracer
from domain.connection import Connection, DatabaseType, InternalCredentials, SslSettings
from domain.crm import CrmKeys
from domain.errors import Unavailable
from entrypoints.composition.bundles import EventLog, JobTable, Publishers, ServiceTables
from entrypoints.composition.overrides import Overrides
from entrypoints.connection_settings import InternalDatasource
from entrypoints.roles import ALL_ROLES, Role
from entrypoints.settings import Settings, SettingsError
from entrypoints.tracing import open_tracer

log = logging.getLogger("fetcher")

KEY_FILE = "master.key"


@contextlib.asynccontextmanager
async def open_database_engine(settings: Settings) -> AsyncIterator[AsyncEngine | None]:
    """On PostgreSQL, the one engine (SQLAlchemy on asyncpg, one pool) the service tables and
    the checkpoints share (the event store keeps its own asyncpg pool); None on the embedded
    default (its event store and tables are two SQLite files). Connects lazily."""
    database = settings.database.postgres
    if database is None:
        yield None
        return
    engine = create_engine_for(database)
    try:
        yield engine
    finally:
        await engine.dispose()


@contextlib.asynccontextmanager
async def open_event_store(
    settings: Settings, *, fail_fast: bool = False
) -> AsyncIterator[EventStore]:
    """The event store on PostgreSQL or on its SQLite file; its tables are created now.
    ``fail_fast``: for a process that answers requests (an outage
    is ``Unavailable`` within seconds instead of after the store's retries)."""
    database = settings.database
    store = event_store_for(database.postgres or database.event_store_file, fail_fast=fail_fast)
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


def log_watch_for(settings: Settings, store: EventStore) -> LogWatch | None:
    """How the followers hear the log grow in other processes: on PostgreSQL, by listening on
    the channel the event store notifies when it inserts; elsewhere there is no other process
    to hear (the embedded default wakes its followers in-process)."""
    database = settings.database.postgres
    if database is None:
        return None
    channel = store.notification_channel()
    return None if channel is None else PostgresLogWatch(database, channel)


@contextlib.asynccontextmanager
async def open_event_log(
    settings: Settings,
    *,
    fail_fast: bool = False,
    watched: bool = False,
    store: JobEventStore | None = None,
    audit_log: AuditLog | None = None,
) -> AsyncIterator[EventLog]:
    """The event log: the given ``store`` (and its ``audit_log``, if it has one), or the event
    store opened from the settings, which is its own audit log. ``watched``: also how the
    followers hear it grow in other processes (for the relay)."""
    if store is not None:
        yield EventLog(store, audit_log)
        return
    async with open_event_store(settings, fail_fast=fail_fast) as opened:
        yield EventLog(opened, opened, log_watch_for(settings, opened) if watched else None)


@contextlib.asynccontextmanager
async def open_checkpoint_store(
    settings: Settings, engine: AsyncEngine | None = None
) -> AsyncIterator[SqlCheckpointStore]:
    """The audit checkpoints, in the event store's database; the table is created now. On
    PostgreSQL, on ``engine`` when given (the service tables' engine: one pool per database);
    on the embedded default, beside the event store's SQLite file."""
    database = settings.database
    if database.postgres is not None and engine is not None:
        checkpoints = SqlCheckpointStore(engine)
    else:
        checkpoints = SqlCheckpointStore.for_database(
            database.postgres or database.event_store_file
        )
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
    job_index: JobTable | None = None,
    engine: AsyncEngine | None = None,
) -> AsyncIterator[ServiceTables]:
    """The connection repository and the job table: those given, the others on one engine (one
    pool) for the service's database (``engine`` when given, else one of their own), their
    tables created now."""
    if connections is not None and job_index is not None:
        yield ServiceTables(connections, job_index)
        return
    database = settings.database
    owned = engine is None
    if engine is None:
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
        yield ServiceTables(connections, job_index, engine)
    finally:
        if owned:
            await engine.dispose()


def s3_settings(settings: Settings) -> S3Settings:
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
    storage = await S3ResultStorage.open(s3_settings(settings))
    try:
        await storage.check()
    finally:
        await storage.close()


@contextlib.asynccontextmanager
async def open_result_storage(
    settings: Settings,
) -> AsyncIterator[S3ResultStorage | FilesystemResultStorage]:
    """The object storage of results (and of the audit witnesses): the S3 bucket, or the data
    folder's ``objects`` when no bucket is set."""
    config = settings.storage
    storage: S3ResultStorage | FilesystemResultStorage
    if config.uses_s3:
        storage = await S3ResultStorage.open(s3_settings(settings))
    else:
        storage = FilesystemResultStorage(
            settings.data_dir / "objects", key_prefix=config.key_prefix
        )
    try:
        yield storage
    finally:
        await storage.close()


def wants_witnesses(settings: Settings, roles: frozenset[Role]) -> bool:
    """Whether this process opens the audit checkpoints' witnesses, with
    ``FETCHER_AUDIT_WITNESS`` on: a relay writes them, an API reads them (the console's Verify
    compares a job's checkpoint with its witness); on the bucket when one is set, or on the
    data folder when the process runs every role (``fetcher serve``). A separate relay
    without a bucket says so and does not witness; a separate API without one compares
    nothing."""
    if not roles & {Role.RELAY, Role.API} or not settings.audit.witness:
        return False
    if settings.storage.uses_s3 or roles == ALL_ROLES:
        return True
    if Role.RELAY in roles:
        log.warning(
            "audit.witness.off",
            extra={"reason": "no OBJECT_STORAGE_BUCKET for the relay (FETCHER_AUDIT_WITNESS)"},
        )
    return False


DECLARE_HINT = (
    "set FETCHER_BROKER_DECLARE_TOPOLOGY=true, run `fetcher broker declare`, or load "
    "`fetcher broker definitions` into the broker"
)
"""What to do when the broker lacks an entity of the topology."""


def broker_topology(settings: Settings) -> RabbitTopology:
    return RabbitTopology(
        work_queue=settings.broker.work_queue, events_exchange=settings.broker.events_exchange
    )


async def declare_broker_topology(settings: Settings, *, all_roles: bool) -> None:
    """Declares the exchanges, queues and bindings (idempotent) when a broker is configured
    and ``FETCHER_BROKER_DECLARE_TOPOLOGY`` says so (by default only ``fetcher serve``,
    ``all_roles``, does)."""
    broker = settings.broker
    if broker.url and broker.declares_topology(all_roles=all_roles):
        await broker_topology(settings).apply(broker.url)


def unroutable_messages(settings: Settings, metrics: RelayMetrics) -> UnroutableMessages:
    """What the publishers had returned, with the hint that fits how this process was set."""
    if settings.broker.declare_topology:
        remedy = "or restart with FETCHER_BROKER_DECLARE_TOPOLOGY=true to declare it again"
    else:
        remedy = "or set FETCHER_BROKER_DECLARE_TOPOLOGY=true to declare the reference topology"
    return UnroutableMessages(metrics, remedy=remedy)


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


@contextlib.asynccontextmanager
async def open_work_queue(
    settings: Settings,
    signer: HmacMessageSigner,
    unroutable: UnroutableMessages | None = None,
) -> AsyncIterator[WorkQueue]:
    broker = settings.broker
    queue: WorkQueue
    if broker.url:
        queue = await AioPikaWorkQueue.connect(
            broker.url, broker.work_queue, signer, unroutable=unroutable
        )
    else:
        queue = InProcessWorkQueue(signer, queue_name=broker.work_queue)
    try:
        yield queue
    finally:
        await queue.close()


@contextlib.asynccontextmanager
async def open_event_publisher(
    settings: Settings,
    signer: HmacMessageSigner,
    unroutable: UnroutableMessages | None = None,
) -> AsyncIterator[JobEventPublisher]:
    broker = settings.broker
    publisher: JobEventPublisher
    if broker.url:
        publisher = await AioPikaJobEventPublisher.connect(
            broker.url,
            broker.events_exchange,
            broker.cloudevents_source,
            signer,
            unroutable=unroutable,
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
    try:
        consumer = await RabbitWorkConsumer.connect(
            broker.url, broker.work_queue, signer, handler, prefetch=broker.workers
        )
    except PortError as error:
        if "does not exist" not in error.message:
            raise
        raise PortError(f"{error.message}: {DECLARE_HINT}") from error
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


def datasource_engines(
    pool_size: int = 4,
    pool_idle_seconds: float = 60.0,
    server_json: bool = False,
    crm_keys: CrmKeys | None = None,
) -> dict[DatabaseType, Callable[[], DatasourceReader]]:
    """The engine adapter of each database type this build can read, built on first use; the
    pooling engines keep up to ``pool_size`` connections per stored connection version;
    ``server_json``: PostgreSQL builds the result JSON where it can; ``crm_keys``: the CRM
    plugin's keys, for MongoDB's ``plugin_crm`` path."""

    def postgres() -> DatasourceReader:
        from adapters.datasources.postgres.reader import PostgresReader

        return PostgresReader(
            server_json=server_json, pool_size=pool_size, pool_idle_seconds=pool_idle_seconds
        )

    def mysql() -> DatasourceReader:
        from adapters.datasources.mysql.reader import MySqlReader

        return MySqlReader(pool_size=pool_size, pool_idle_seconds=pool_idle_seconds)

    def sql_server() -> DatasourceReader:
        from adapters.datasources.mssql.reader import SqlServerReader

        return SqlServerReader()

    def oracle() -> DatasourceReader:
        from adapters.datasources.oracle.reader import OracleReader

        return OracleReader()

    def mongodb() -> DatasourceReader:
        from adapters.datasources.mongodb.reader import MongoReader

        return MongoReader(crm_keys=crm_keys)

    return {
        DatabaseType.POSTGRESQL: postgres,
        DatabaseType.MYSQL: mysql,
        DatabaseType.SQL_SERVER: sql_server,
        DatabaseType.ORACLE: oracle,
        DatabaseType.MONGODB: mongodb,
    }


def internal_connection(datasource: InternalDatasource) -> Connection:
    """An internal datasource as a connection: deterministic id, no product, never stored;
    its credentials travel with it, in plaintext as configured."""
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
        internal_credentials=InternalCredentials(
            datasource.password, datasource.ssl_ca, datasource.ssl_cert, datasource.ssl_key
        ),
    )


@dataclass(frozen=True, slots=True)
class Infrastructure:
    """Everything the roles of one process share, opened once: keys, clock, tracer, metrics,
    the event log and the SQL tables of the service's database, the audit checkpoints (API
    and relay, where the store keeps them), result storage (worker), the publishers (relay),
    the datasource reader and the connection directory."""

    settings: Settings
    roles: frozenset[Role]
    ring: KeyRing
    clock: Clock
    tracer: Tracer
    metrics: PrometheusMetrics
    events: EventLog
    tables: ServiceTables
    progress: JobProgressStore
    checkpoints: CheckpointStore | None
    storage: ResultStorage | None
    witnesses: WitnessStore | None
    """Where the relay keeps each checkpoint outside the database (``FETCHER_AUDIT_WITNESS``),
    and the API reads them back."""
    publishers: Publishers | None
    unroutable: UnroutableMessages | None
    """What the relay's publishers had returned (a broker is configured)."""
    engines: dict[DatabaseType, Callable[[], DatasourceReader]]
    reader: DatasourceReader
    host_guard: HostGuard | None
    directory: ConnectionDirectory
    endpoints: EndpointFactory
    internal_signer: HmacMessageSigner


async def open_infrastructure(
    stack: contextlib.AsyncExitStack,
    settings: Settings,
    roles: frozenset[Role],
    overrides: Overrides,
    metrics: PrometheusMetrics,
) -> Infrastructure:
    """Opens on ``stack`` what ``roles`` need (the overrides given instead): only the worker
    opens result storage, only the relay the publishers; the broker's topology is declared
    when one is configured."""
    try:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise SettingsError(
            f"FETCHER_DATA_DIR {settings.data_dir} cannot be created: {error.strerror}"
        ) from None
    tracer = overrides.tracer
    if tracer is None:
        tracer = await stack.enter_async_context(
            open_tracer(settings.tracing, roles, version=settings.version)
        )
    ring = load_key_ring(settings) if overrides.key_ring is None else overrides.key_ring
    clock = SystemClock() if overrides.clock is None else overrides.clock
    # The API alone answers 503 within seconds when the event store is down; a worker or
    # relay rides out short outages with the store's retries.
    events = await stack.enter_async_context(
        open_event_log(
            settings,
            fail_fast=roles == {Role.API},
            watched=Role.RELAY in roles,
            store=overrides.store,
            audit_log=overrides.audit_log,
        )
    )
    # On PostgreSQL, one engine (one pool) for every table beside the event store's.
    engine = await stack.enter_async_context(open_database_engine(settings))
    tables = await stack.enter_async_context(
        open_sql_adapters(settings, overrides.connections, overrides.job_index, engine)
    )
    checkpoints = overrides.checkpoints
    if checkpoints is None and events.audit_log is not None and roles & {Role.API, Role.RELAY}:
        checkpoints = await stack.enter_async_context(
            open_checkpoint_store(settings, tables.engine)
        )
    await declare_broker_topology(settings, all_roles=roles == ALL_ROLES)
    storage = overrides.storage
    witnesses = overrides.witnesses
    witnessing = witnesses is None and wants_witnesses(settings, roles)
    if (storage is None and Role.WORKER in roles) or witnessing:
        opened = await stack.enter_async_context(open_result_storage(settings))
        storage = opened if storage is None and Role.WORKER in roles else storage
        witnesses = opened if witnessing else witnesses

    options = settings.connections
    engines = datasource_engines(
        options.pool_size,
        options.pool_idle_seconds,
        options.server_json,
        options.crm_keys,
    )
    host_guard = overrides.host_guard
    if host_guard is None and options.ssrf_guard:
        host_guard = NetworkHostGuard()
    reader = overrides.reader
    if reader is None:
        registry = EngineRegistry(engines)
        stack.push_async_callback(registry.aclose)
        reader = registry
        if host_guard is not None:
            reader = GuardedDatasourceReader(reader, host_guard)
    internal_signer = HmacMessageSigner.from_ring(ring, "internal")
    publishers: Publishers | None = None
    unroutable: UnroutableMessages | None = None
    if Role.RELAY in roles:
        work_queue = overrides.work_queue
        event_publisher = overrides.event_publisher
        if settings.broker.url and (work_queue is None or event_publisher is None):
            unroutable = unroutable_messages(settings, metrics)
        if work_queue is None:
            work_queue = await stack.enter_async_context(
                open_work_queue(settings, internal_signer, unroutable)
            )
        if event_publisher is None:
            external_signer = HmacMessageSigner.from_ring(ring, "external")
            event_publisher = await stack.enter_async_context(
                open_event_publisher(settings, external_signer, unroutable)
            )
        publishers = Publishers(work_queue, event_publisher)
    return Infrastructure(
        settings=settings,
        roles=roles,
        ring=ring,
        clock=clock,
        tracer=tracer,
        metrics=metrics,
        events=events,
        tables=tables,
        progress=tables.jobs if overrides.job_progress is None else overrides.job_progress,
        checkpoints=checkpoints,
        storage=storage,
        witnesses=witnesses,
        publishers=publishers,
        unroutable=unroutable,
        engines=engines,
        reader=reader,
        host_guard=host_guard,
        directory=ConnectionDirectory(
            tables.connections,
            {d.config_name: internal_connection(d) for d in options.internal},
            visible_to=options.internal_visibility(),
        ),
        endpoints=EndpointFactory(AesGcmCredentialCipher(ring)),
        internal_signer=internal_signer,
    )
