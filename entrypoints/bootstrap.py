"""The composition root: every adapter built from settings (or overridden), every role wired.

``bootstrap`` is the one place that decides which adapter serves which port. The runners (and
so the end-to-end processes) and the tests all go through it; tests swap adapters with its
overrides instead of wiring use cases by hand.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import AsyncIterator, Callable, Collection

from adapters.common.clock import SystemClock, Uuid7Generator
from adapters.crypto.credentials import AesGcmCredentialCipher
from adapters.crypto.keys import KeyRing
from adapters.crypto.sealing import AesGcmResultSealer
from adapters.crypto.signing import HmacMessageSigner
from adapters.datasources.registry import EngineRegistry
from adapters.memory.rate_limiter import InMemoryTokenBucket
from adapters.memory.schema_cache import InMemorySchemaCache
from adapters.messaging.local import InProcessWorkConsumer, InProcessWorkQueue
from adapters.metrics.prometheus import PrometheusMetrics
from adapters.security.guarded_reader import GuardedDatasourceReader
from adapters.security.host_guard import NetworkHostGuard
from application.audit.checkpointer import RecordCheckpoints
from application.cached_connections import CachingConnectionRepository
from application.cached_discovery import SchemaCachingReader
from application.commands.request_job import RequestJob
from application.commands.run_job import RunJob, RunLimits
from application.connection_directory import ConnectionDirectory, internal_id
from application.endpoints import EndpointFactory
from application.fresh_job_index import FreshJobIndex
from application.ports.audit import AuditLog, CheckpointStore
from application.ports.clock import Clock, IdGenerator
from application.ports.connection_repository import ConnectionRepository
from application.ports.datasource_reader import DatasourceReader
from application.ports.host_guard import HostGuard
from application.ports.job_event_store import JobEventStore
from application.ports.job_index import JobIndex
from application.ports.job_leases import JobLeases
from application.ports.job_progress import JobProgressStore
from application.ports.messaging import (
    JobEventPublisher,
    WorkConsumer,
    WorkHandler,
    WorkQueue,
)
from application.ports.rate_limiter import RateLimiter
from application.ports.result_storage import ResultStorage
from application.ports.schema_cache import SchemaCache
from application.ports.tracer import Tracer
from application.queries.audit_checkpoints import ListCheckpoints
from application.queries.get_job import GetJob, GetJobHistory
from application.readiness import Check, Dependency, Readiness
from application.recent_checks import RecentChecks
from application.running_jobs import RunningJobs
from domain.connection import Connection, DatabaseType, InternalCredentials, SslSettings
from entrypoints.connection_settings import InternalDatasource
from entrypoints.infrastructure import (
    broker_dependency,
    database_dependency,
    declare_broker_topology,
    growth_watch_for,
    load_audit_keys,
    load_key_ring,
    log_watch_for,
    open_broker_probe,
    open_checkpoint_store,
    open_event_publisher,
    open_event_store,
    open_rabbit_consumer,
    open_result_storage,
    open_sql_adapters,
    open_work_queue,
    storage_dependency,
)
from entrypoints.roles import (
    ALL_ROLES,
    FOLLOWERS,
    ApiServices,
    Fetcher,
    Probes,
    Relay,
    Role,
    Worker,
    build_relay,
    connection_services,
    run_limits_from,
    work_handler,
)
from entrypoints.settings import Settings, SettingsError
from entrypoints.tracing import open_tracer

FOLLOWER_POLL_SECONDS = 0.5
RELAY_POLL_SECONDS = 0.2
"""A relay without the API in its process, and without notifications, is never woken by a new
job, so it looks more often."""
LISTENING_POLL_SECONDS = 5.0
"""Followers woken by the database's notifications poll only as a safety net."""


def datasource_engines(
    pool_size: int = 4, pool_idle_seconds: float = 60.0, server_json: bool = False
) -> dict[DatabaseType, Callable[[], DatasourceReader]]:
    """The engine adapter of each database type this build can read, built on first use; the
    pooling engines keep up to ``pool_size`` connections per stored connection version;
    ``server_json``: PostgreSQL builds the result JSON where it can."""

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

        return MongoReader()

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


def leases_of(index: JobIndex) -> JobLeases:
    """The job index, which keeps the leases of running jobs beside its rows (ours all do)."""
    if not all(callable(getattr(index, name, None)) for name in ("take", "renew", "hold")):
        raise SettingsError("the job index keeps no job leases")
    return index  # type: ignore[return-value]


def audit_log_of(store: JobEventStore) -> AuditLog | None:
    """The event store, when it also reads its log as stored (ours does; the twin not)."""
    if callable(getattr(store, "read_records", None)):
        return store  # type: ignore[return-value]
    return None


def progress_store_of(index: JobIndex) -> JobProgressStore | None:
    """The job index, when it also keeps the progress of running jobs (ours all do)."""
    if callable(getattr(index, "record", None)) and callable(getattr(index, "progress", None)):
        return index  # type: ignore[return-value]
    return None


@contextlib.asynccontextmanager
async def bootstrap(
    settings: Settings,
    *,
    roles: Collection[Role] = ALL_ROLES,
    key_ring: KeyRing | None = None,
    store: JobEventStore | None = None,
    connections: ConnectionRepository | None = None,
    job_index: JobIndex | None = None,
    reader: DatasourceReader | None = None,
    host_guard: HostGuard | None = None,
    schema_cache: SchemaCache | None = None,
    test_limiter: RateLimiter | None = None,
    storage: ResultStorage | None = None,
    work_queue: WorkQueue | None = None,
    event_publisher: JobEventPublisher | None = None,
    work_consumer: Callable[[WorkHandler], WorkConsumer] | None = None,
    clock: Clock | None = None,
    ids: IdGenerator | None = None,
    worker_id: str | None = None,
    run_limits: RunLimits | None = None,
    tracer: Tracer | None = None,
    job_progress: JobProgressStore | None = None,
    metrics: PrometheusMetrics | None = None,
    checkpoints: CheckpointStore | None = None,
) -> AsyncIterator[Fetcher]:
    """Opens what ``roles`` need from ``settings``, wires those roles, closes it all at exit.

    Every keyword replaces the adapter (or value) bootstrap would build, so tests swap
    adapters without wiring use cases themselves. A given ``reader`` is used as it is (it must
    guard its own dials); a given ``host_guard`` turns the SSRF guard on; ``work_consumer``
    builds the consumer around the worker's handler. Bootstrap closes only what it opened.
    ``roles`` also decides what is opened at all: only the worker opens result storage, the API
    alone no work queue. Readiness checks what was opened; ``metrics`` (one registry for the
    process) is given to every use case and policy that counts its work. Without a ``tracer``,
    one is opened from the tracing settings (none when tracing is off); ``job_progress``
    defaults to the job index when it keeps progress.
    """
    roles = frozenset(roles)
    if metrics is None:
        metrics = PrometheusMetrics(followers=FOLLOWERS if Role.RELAY in roles else ())
    async with contextlib.AsyncExitStack() as stack:
        try:
            settings.data_dir.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise SettingsError(
                f"FETCHER_DATA_DIR {settings.data_dir} cannot be created: {error.strerror}"
            ) from None
        if tracer is None:
            tracer = await stack.enter_async_context(
                open_tracer(settings.tracing, roles, version=settings.version)
            )
        ring = load_key_ring(settings) if key_ring is None else key_ring
        if clock is None:
            clock = SystemClock()
        if store is None:
            # The API alone answers 503 within seconds when the event store is down; a
            # worker or relay rides out short outages with the library's retries.
            store = await stack.enter_async_context(
                open_event_store(settings, fail_fast=roles == {Role.API})
            )
        repository, index = await stack.enter_async_context(
            open_sql_adapters(settings, connections, job_index)
        )
        if job_progress is None:
            job_progress = progress_store_of(index)
        audit_log = audit_log_of(store)
        if checkpoints is None and audit_log is not None and roles & {Role.API, Role.RELAY}:
            checkpoints = await stack.enter_async_context(open_checkpoint_store(settings))
        await declare_broker_topology(settings)
        if storage is None and Role.WORKER in roles:
            storage = await stack.enter_async_context(open_result_storage(settings))

        options = settings.connections
        engines = datasource_engines(
            options.pool_size, options.pool_idle_seconds, options.server_json
        )
        if host_guard is None and options.ssrf_guard:
            host_guard = NetworkHostGuard()
        if reader is None:
            registry = EngineRegistry(engines)
            stack.push_async_callback(registry.aclose)
            reader = registry
            if host_guard is not None:
                reader = GuardedDatasourceReader(reader, host_guard)
        directory = ConnectionDirectory(
            repository,
            {d.config_name: internal_connection(d) for d in options.internal},
            visible_to=options.internal_visibility(),
        )
        endpoints = EndpointFactory(AesGcmCredentialCipher(ring))
        internal_signer = HmacMessageSigner.from_ring(ring, "internal")

        relay: Relay | None = None
        if Role.RELAY in roles:
            if work_queue is None:
                work_queue = await stack.enter_async_context(
                    open_work_queue(settings, internal_signer)
                )
            if event_publisher is None:
                external_signer = HmacMessageSigner.from_ring(ring, "external")
                event_publisher = await stack.enter_async_context(
                    open_event_publisher(settings, external_signer)
                )
            watch = log_watch_for(settings, store)
            if watch is not None:
                poll_interval = LISTENING_POLL_SECONDS
            elif Role.API in roles:
                poll_interval = FOLLOWER_POLL_SECONDS
            else:
                poll_interval = RELAY_POLL_SECONDS
            relay = build_relay(
                settings,
                store,
                index,
                work_queue,
                event_publisher,
                clock,
                poll_interval=poll_interval,
                queue_is_volatile=isinstance(work_queue, InProcessWorkQueue),
                tracer=tracer,
                metrics=metrics,
                leases=leases_of(index),
                watch=growth_watch_for(store, watch),
                checkpoints=RecordCheckpoints(
                    audit_log,
                    checkpoints,
                    load_audit_keys(settings, ring).signer,
                    clock,
                    every_records=settings.audit.checkpoint_every,
                    every_seconds=settings.audit.checkpoint_seconds,
                )
                if audit_log is not None and checkpoints is not None
                else None,
            )

        # A worker's name lookups are remembered for a moment (a second by default): a job
        # runs against a connection as it was at most that long ago; writes through this
        # process's API forget them at once.
        worker_lookups: CachingConnectionRepository | None = None
        worker: Worker | None = None
        if Role.WORKER in roles:
            if storage is None:
                raise SettingsError("the worker needs result storage")
            worker_directory = directory
            if options.worker_lookup_cache_seconds > 0:
                worker_lookups = CachingConnectionRepository(
                    repository, options.worker_lookup_cache_seconds, clock
                )
                worker_directory = ConnectionDirectory(
                    worker_lookups, directory.internal, visible_to=directory.visible_to
                )
            job_reader = reader
            if options.worker_schema_ttl_seconds > 0:
                worker_schemas = InMemorySchemaCache(options.worker_schema_ttl_seconds)
                job_reader = SchemaCachingReader(reader, worker_schemas)
            run_job = RunJob(
                store=store,
                directory=worker_directory,
                endpoints=endpoints,
                reader=job_reader,
                sealer=AesGcmResultSealer.from_ring(ring),
                storage=storage,
                clock=clock,
                worker_id=f"{socket.gethostname()}:{os.getpid()}"
                if worker_id is None
                else worker_id,
                limits=run_limits_from(settings) if run_limits is None else run_limits,
                tracer=tracer,
                progress=job_progress,
                metrics=metrics,
                leases=leases_of(index),
            )
            runs = RunningJobs(work_handler(run_job))
            stack.push_async_callback(runs.stop)  # after the consumer's own drain
            handler: WorkHandler = runs
            consumer: WorkConsumer
            if work_consumer is not None:
                consumer = work_consumer(handler)
                stack.push_async_callback(consumer.stop)
            elif isinstance(work_queue, InProcessWorkQueue):
                consumer = InProcessWorkConsumer(
                    work_queue, internal_signer, handler, concurrency=settings.broker.workers
                )
                stack.push_async_callback(consumer.stop)
            else:
                consumer = await stack.enter_async_context(
                    open_rabbit_consumer(settings, internal_signer, handler)
                )
            worker = Worker(run_job=run_job, consumer=consumer, runs=runs)

        dependencies: list[Dependency] = [database_dependency(settings, store)]
        broker_checks: list[Check] = []
        if relay is not None and work_queue is not None and event_publisher is not None:
            broker_checks = [work_queue.check, event_publisher.check]
        else:
            probe = await stack.enter_async_context(open_broker_probe(settings))
            broker_checks = [probe.check] if probe is not None else []
        broker = broker_dependency(settings, *broker_checks)
        if broker is not None:
            dependencies.append(broker)
        if worker is not None and storage is not None:
            dependencies.append(storage_dependency(settings, storage))
        probes = Probes(
            Readiness(
                dependencies,
                metrics=metrics,
                version=settings.probes.version,
                deployment_mode=settings.probes.deployment_mode,
            ),
            metrics,
            settings.tenancy.tenancy,
        )

        api: ApiServices | None = None
        if Role.API in roles:
            if schema_cache is None:
                schema_cache = InMemorySchemaCache(options.schema_cache_ttl_seconds)
            if test_limiter is None:
                test_limiter = InMemoryTokenBucket(capacity=10, per_minute=10)
            if ids is None:
                ids = Uuid7Generator()
            # The API's name lookups may be remembered briefly; its writes forget them, and
            # the worker's in this process (above).
            api_directory = ConnectionDirectory(
                CachingConnectionRepository(
                    repository,
                    options.lookup_cache_seconds,
                    clock,
                    linked=(worker_lookups,) if worker_lookups is not None else (),
                ),
                directory.internal,
                visible_to=directory.visible_to,
            )
            api = ApiServices(
                request_job=RequestJob(
                    store,
                    api_directory,
                    endpoints,
                    reader,
                    clock,
                    ids,
                    schemas=schema_cache,
                    tracer=tracer,
                    metrics=metrics,
                    recent_checks=RecentChecks(options.check_cache_seconds, clock),
                ),
                get_job=GetJob(store, progress=job_progress),
                get_job_history=GetJobHistory(store),
                connections=connection_services(
                    directory=api_directory,
                    endpoints=endpoints,
                    reader=reader,
                    clock=clock,
                    ids=ids,
                    jobs=FreshJobIndex(index, store),
                    cache=schema_cache,
                    limiter=test_limiter,
                    guard=host_guard,
                    supported=frozenset(engines),
                    max_page_limit=options.max_pagination_limit,
                    max_months=options.max_pagination_months,
                ),
                probes=probes,
                version=settings.version,
                tenancy=settings.tenancy.tenancy,
                tracer=tracer,
                list_checkpoints=ListCheckpoints(checkpoints) if checkpoints is not None else None,
            )
        yield Fetcher(api=api, worker=worker, relay=relay, probes=probes)
