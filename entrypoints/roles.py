"""The roles a process runs (what the HTTP layer and the runners get from the composition
root), and how each is assembled from ports."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import timedelta
from enum import Enum
from typing import TypeVar

from adapters.metrics.prometheus import PrometheusMetrics
from application.audit import checkpointer
from application.audit.checkpointer import RecordCheckpoints
from application.commands.assign_connection import AssignConnection
from application.commands.check_connection import CheckConnection
from application.commands.register_connection import ALL_TYPES, RegisterConnection
from application.commands.remove_connection import RemoveConnection
from application.commands.request_job import RequestJob
from application.commands.run_job import RunJob, RunLimits
from application.commands.update_connection import UpdateConnection
from application.connection_directory import ConnectionDirectory
from application.endpoints import EndpointFactory
from application.fresh_job_index import FreshJobIndex
from application.policies import emit_events, publish_work_orders
from application.policies.emit_events import EmitJobEvents
from application.policies.follower import (
    LogFollower,
    PeriodicTask,
    ProjectionFollower,
    SharedLogReads,
    WakeOnGrowth,
)
from application.policies.publish_work_orders import PublishWorkOrders
from application.policies.reap_jobs import ReapJobs
from application.policies.requeue_pending import RequeuePending
from application.ports.clock import Clock, IdGenerator
from application.ports.credential_cipher import CredentialCipher
from application.ports.datasource_reader import DatasourceReader
from application.ports.host_guard import HostGuard
from application.ports.job_event_store import JobEventStore
from application.ports.job_index import JobIndex
from application.ports.job_leases import JobLeases
from application.ports.log_watch import LogWatch
from application.ports.messaging import (
    JobEventPublisher,
    Settlement,
    WorkConsumer,
    WorkHandler,
    WorkOrder,
    WorkQueue,
)
from application.ports.metrics import Metrics
from application.ports.rate_limiter import RateLimiter
from application.ports.schema_cache import SchemaCache
from application.ports.tracer import NO_TRACER, Tracer
from application.queries.audit_checkpoints import ListCheckpoints
from application.queries.connection_schema import GetConnectionSchema
from application.queries.get_connection import GetConnection
from application.queries.get_job import GetJob, GetJobHistory
from application.queries.list_connections import ListConnections
from application.queries.unassigned_connections import ListUnassignedConnections
from application.queries.validate_schema import ValidateSchema
from application.readiness import Readiness
from application.running_jobs import RunningJobs
from domain.connection import DatabaseType
from domain.tenant import SINGLE_TENANCY, Tenancy
from entrypoints.settings import Settings

T = TypeVar("T")

REAPER_POLL_SECONDS = 5.0
"""With the lease, bounds how long a dead worker's job waits for the reaper's dispatch."""
AUDIT_POLL_SECONDS = 1.0
RECORD_DELAY_SECONDS = 0.1
"""The dispatcher and the emitter record their position at most this long after publishing
(once for everything published meanwhile); a relay that crashes publishes again at most what
it published in that time (at least once: a duplicate work order is dropped by the claim, a
duplicate event has the same ``ce-id``)."""
PROJECTION_SETTLE_SECONDS = 0.05
"""The job index waits this long after a wake before it reads, so it projects bigger batches
less often (it is read by queries that tolerate this, and brought up to date first where
they do not)."""
PROJECTION = "projection"
FOLLOWERS = (publish_work_orders.FOLLOWER_NAME, emit_events.FOLLOWER_NAME, PROJECTION)


class Role(Enum):
    """A part of the service a process runs: ``fetcher serve`` runs all three."""

    API = "api"
    WORKER = "worker"
    RELAY = "relay"


ALL_ROLES = frozenset(Role)


@dataclass(slots=True)
class ConnectionServices:
    """The connection use cases, one per route."""

    register: RegisterConnection
    update: UpdateConnection
    remove: RemoveConnection
    check: CheckConnection
    assign: AssignConnection
    get: GetConnection
    list: ListConnections
    list_unassigned: ListUnassignedConnections
    schema: GetConnectionSchema
    validate_schema: ValidateSchema
    max_page_limit: int = 100


def no_op() -> None:
    return None


def _bare_metrics() -> PrometheusMetrics:
    return PrometheusMetrics(process_collectors=False)


@dataclass(slots=True)
class Probes:
    """What a process answers on ``/health``, ``/readyz`` and ``/metrics``: the readiness of
    the dependencies it opened, and its metrics (one registry for the whole process)."""

    readiness: Readiness = field(default_factory=Readiness)
    metrics: PrometheusMetrics = field(default_factory=_bare_metrics)
    tenancy: Tenancy = SINGLE_TENANCY
    """Which tenants this process serves, for ``/readyz/tenant/{id}``."""


@dataclass(slots=True)
class ApiServices:
    """The API role: the use cases behind the routes, the process's probes, and how requests
    are tenanted (each route passes the caller's tenant to its use case)."""

    request_job: RequestJob
    get_job: GetJob
    get_job_history: GetJobHistory
    connections: ConnectionServices
    probes: Probes = field(default_factory=Probes)
    version: str = "0.0.0"
    tenancy: Tenancy = SINGLE_TENANCY
    tracer: Tracer = NO_TRACER
    """The process's tracer; the HTTP layer traces requests with it too."""
    list_checkpoints: ListCheckpoints | None = None
    """The audit checkpoints (None: the event store keeps none; the list is empty)."""


@dataclass(slots=True)
class Worker:
    """The worker role: its consumer takes work orders off the queue and ``run_job`` runs
    each one, in a task of ``runs`` (so a closing channel never stops an extraction)."""

    run_job: RunJob
    consumer: WorkConsumer
    runs: RunningJobs | None = None


Loop = LogFollower | ProjectionFollower | PeriodicTask | WakeOnGrowth


@dataclass(slots=True)
class Relay:
    """The relay role: the followers of the event log and the reaper."""

    dispatcher: LogFollower
    """Publishes a work order for every requested job."""
    emitter: LogFollower
    """Publishes ``job.completed`` / ``job.failed`` for every terminal event."""
    projection: ProjectionFollower
    """Keeps the job index."""
    reaper: PeriodicTask
    """Fails or dispatches again the jobs that stalled."""
    requeue_on_start: RequeuePending | None = None
    """Set when the work queue does not survive a restart (the in-process one): run it once
    before the loops start."""
    waker: WakeOnGrowth | None = None
    """Wakes the followers when the log grows: in this process (the store tells its commits),
    and in others (PostgreSQL notifications)."""
    audit: PeriodicTask | None = None
    """Records the signed audit checkpoints of the log (when the event store keeps them)."""

    @property
    def loops(self) -> tuple[Loop, ...]:
        loops: tuple[Loop, ...] = (self.dispatcher, self.emitter, self.projection, self.reaper)
        if self.waker is not None:
            loops = (*loops, self.waker)
        return loops if self.audit is None else (*loops, self.audit)


class Fetcher:
    """The roles one process runs, wired on the adapters they share. Asking for a role that
    was not bootstrapped is a programming error (``RuntimeError``)."""

    __slots__ = ("_api", "_relay", "_worker", "probes")

    def __init__(
        self,
        *,
        api: ApiServices | None = None,
        worker: Worker | None = None,
        relay: Relay | None = None,
        probes: Probes | None = None,
    ) -> None:
        self._api = api
        self._worker = worker
        self._relay = relay
        self.probes = Probes() if probes is None else probes
        """The readiness and metrics of the roles this process runs."""

    @property
    def api(self) -> ApiServices:
        return _required(self._api, Role.API)

    @property
    def worker(self) -> Worker:
        return _required(self._worker, Role.WORKER)

    @property
    def relay(self) -> Relay:
        return _required(self._relay, Role.RELAY)


def _required(part: T | None, role: Role) -> T:
    if part is None:
        raise RuntimeError(f"the {role.value} role was not bootstrapped")
    return part


def connection_services(
    *,
    directory: ConnectionDirectory,
    endpoints: EndpointFactory,
    reader: DatasourceReader,
    clock: Clock,
    ids: IdGenerator,
    jobs: JobIndex,
    cache: SchemaCache,
    limiter: RateLimiter,
    guard: HostGuard | None = None,
    supported: Collection[DatabaseType] = ALL_TYPES,
    max_page_limit: int = 100,
    max_months: int = 1,
) -> ConnectionServices:
    """Wires the connection use cases on the given adapters. ``reader`` is expected to guard
    dials already when the SSRF guard is on; ``guard`` is for the checks at write time."""
    repository = directory.repository
    cipher: CredentialCipher = endpoints.cipher
    return ConnectionServices(
        register=RegisterConnection(repository, cipher, clock, ids, guard, supported),
        update=UpdateConnection(repository, cipher, clock, jobs, cache, guard, supported),
        remove=RemoveConnection(repository, clock, jobs, cache),
        check=CheckConnection(directory, endpoints, reader, limiter),
        assign=AssignConnection(repository, cipher, clock),
        get=GetConnection(directory),
        list=ListConnections(directory, clock, max_months),
        list_unassigned=ListUnassignedConnections(repository, clock, max_months),
        schema=GetConnectionSchema(directory, endpoints, reader),
        validate_schema=ValidateSchema(directory, endpoints, reader, cache),
        max_page_limit=max_page_limit,
    )


def work_handler(run_job: RunJob) -> WorkHandler:
    """The worker's handler: runs the ordered job (as the order's tenant)."""

    async def handle(order: WorkOrder) -> Settlement:
        settlement = await run_job(
            order.job_id,
            tenant=order.tenant,
            request_id=order.request_id,
            trace_context=order.trace_context,
        )
        return settlement

    return handle


def run_limits_from(settings: Settings) -> RunLimits:
    engine = settings.engine
    return RunLimits(
        max_result_bytes=engine.max_result_bytes,
        timeout=engine.timeout_seconds,
        parallelism=engine.parallelism,
        lease=timedelta(seconds=engine.lease_seconds),
        outage_window=float(engine.outage_seconds),
    )


def build_relay(
    settings: Settings,
    store: JobEventStore,
    job_index: JobIndex,
    queue: WorkQueue,
    publisher: JobEventPublisher,
    clock: Clock,
    *,
    poll_interval: float,
    queue_is_volatile: bool = False,
    metrics: Metrics,
    tracer: Tracer = NO_TRACER,
    leases: JobLeases | None = None,
    watch: LogWatch | None = None,
    checkpoints: RecordCheckpoints | None = None,
) -> Relay:
    """The followers and the reaper on the given ports. ``queue_is_volatile``: the work queue
    loses what it holds when the process stops, so pending jobs are queued again at start.
    ``watch``: the followers also wake when it tells that the log grew."""
    reads = SharedLogReads(store)
    emit = EmitJobEvents(store, publisher, tracer=tracer, metrics=metrics)
    relay = Relay(
        dispatcher=LogFollower(
            name=publish_work_orders.FOLLOWER_NAME,
            store=store,
            handle=PublishWorkOrders(
                store,
                queue,
                clock,
                deadline=timedelta(seconds=settings.engine.dispatch_timeout_seconds),
                tracer=tracer,
                metrics=metrics,
            ),
            interested=PublishWorkOrders.interested,
            record_delay=RECORD_DELAY_SECONDS,
            poll_interval=poll_interval,
            metrics=metrics,
            reads=reads,
        ),
        emitter=LogFollower(
            name=emit_events.FOLLOWER_NAME,
            store=store,
            handle=emit,
            interested=EmitJobEvents.interested,
            observe=emit.observe,
            record_delay=RECORD_DELAY_SECONDS,
            poll_interval=poll_interval,
            metrics=metrics,
            reads=reads,
        ),
        projection=ProjectionFollower(
            name=PROJECTION,
            store=store,
            index=job_index,
            poll_interval=poll_interval,
            metrics=metrics,
            reads=reads,
            settle=PROJECTION_SETTLE_SECONDS,
        ),
        reaper=PeriodicTask(
            name="reaper",
            poll_interval=REAPER_POLL_SECONDS,
            action=ReapJobs(
                store,
                job_index,
                queue,
                clock,
                pending_timeout=timedelta(seconds=settings.engine.pending_timeout_seconds),
                metrics=metrics,
                leases=leases,
            ),
        ),
        requeue_on_start=(
            RequeuePending(store, FreshJobIndex(job_index, store), queue, clock)
            if queue_is_volatile
            else None
        ),
        audit=PeriodicTask(
            name=checkpointer.FOLLOWER_NAME,
            poll_interval=AUDIT_POLL_SECONDS,
            action=checkpoints,
        )
        if checkpoints is not None
        else None,
    )
    if watch is not None:
        relay.waker = WakeOnGrowth(
            name="log-watch",
            watch=watch,
            followers=(relay.dispatcher, relay.emitter, relay.projection),
        )
    return relay
