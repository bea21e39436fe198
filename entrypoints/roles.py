"""The roles a process runs: what the HTTP layer and the runners get from the composition
package (``entrypoints.composition`` builds them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import TypeVar

from adapters.metrics.prometheus import PrometheusMetrics
from application.audit.bundle import ExportBundle
from application.audit.checkpoints import ListCheckpoints
from application.audit.proof import ProveJob
from application.audit.verify_job import VerifyJob
from application.connections.commands.assign_connection import AssignConnection
from application.connections.commands.check_connection import CheckConnection
from application.connections.commands.register_connection import RegisterConnection
from application.connections.commands.remove_connection import RemoveConnection
from application.connections.commands.update_connection import UpdateConnection
from application.connections.queries.connection_schema import GetConnectionSchema
from application.connections.queries.get_connection import GetConnection
from application.connections.queries.list_connections import ListConnections
from application.connections.queries.unassigned_connections import ListUnassignedConnections
from application.connections.queries.validate_schema import ValidateSchema
from application.jobs.commands.request_job import RequestJob
from application.jobs.commands.run_job import RunJob
from application.jobs.queries.get_job import GetJob, GetJobHistory
from application.jobs.queries.search_jobs import SearchJobs
from application.jobs.running import RunningJobs
from application.policies import emit_events, publish_work_orders
from application.policies.follower import (
    LogFollower,
    PeriodicTask,
    ProjectionFollower,
    WakeOnGrowth,
)
from application.policies.requeue_pending import RequeuePending
from application.ports.audit import CheckpointKeys
from application.ports.messaging import (
    WorkConsumer,
)
from application.ports.tracer import NO_TRACER, Tracer
from application.readiness import Readiness
from domain.tenant import SINGLE_TENANCY, Tenancy
from entrypoints.http.auth import OPEN, HttpSecurity

T = TypeVar("T")

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


@dataclass(frozen=True, slots=True)
class ConsoleSignIn:
    """Where the console signs in: the issuer (OpenID Connect discovery) and its public
    client id there."""

    issuer: str
    client_id: str


@dataclass(slots=True)
class ConsoleServices:
    """What the console adds to the API's use cases: the job list, one job's proof, bundles
    of the log, the public keys that check checkpoints, and how to sign in."""

    search_jobs: SearchJobs
    verify_job: VerifyJob | None = None
    """None when the event store keeps no audit trail."""
    export_bundle: ExportBundle | None = None
    checkpoint_keys: CheckpointKeys | None = None
    sign_in: ConsoleSignIn | None = None


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
    security: HttpSecurity = OPEN
    """How callers are authenticated and authorised (``OPEN``: not at all, only where that is
    allowed)."""
    console: ConsoleServices | None = None
    """The console's own queries (None: the console pages say it is not available)."""
    prove_job: ProveJob | None = None
    """A job's inclusion proof (None: the event store keeps no audit trail)."""


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
