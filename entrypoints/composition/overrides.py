"""What a caller (a test, a benchmark) gives bootstrap instead of what it would build."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from adapters.crypto.keys import KeyRing
from adapters.metrics.prometheus import PrometheusMetrics
from application.jobs.commands.run_job import RunLimits
from application.ports.audit import AuditLog, CheckpointStore, WitnessStore
from application.ports.clock import Clock, IdGenerator
from application.ports.connection_repository import ConnectionRepository
from application.ports.datasource_reader import DatasourceReader
from application.ports.host_guard import HostGuard
from application.ports.job_event_store import JobEventStore
from application.ports.job_progress import JobProgressStore
from application.ports.messaging import JobEventPublisher, WorkConsumer, WorkHandler, WorkQueue
from application.ports.rate_limiter import RateLimiter
from application.ports.result_storage import ResultStorage
from application.ports.schema_cache import SchemaCache
from application.ports.tracer import Tracer
from entrypoints.composition.bundles import JobTable
from entrypoints.http.auth import HttpSecurity


@dataclass(frozen=True, slots=True, kw_only=True)
class Overrides:
    """Each field set replaces the adapter (or value) bootstrap would build from the settings;
    bootstrap closes only what it opened itself. ``dataclasses.replace`` makes a variant.

    - ``store``: the event store; ``audit_log``: the same store as an ``AuditLog`` when it is
      one (the audit checkpoints are recorded and listed only then).
    - ``job_index``: the job table (index, leases and progress of running jobs);
      ``job_progress`` replaces only where progress is kept.
    - ``reader`` is used as it is (it must guard its own dials); ``host_guard`` turns the SSRF
      guard on for the checks at write time.
    - ``work_consumer`` builds the consumer around the worker's handler.
    - ``security``: how the API authenticates and authorises (by default opened from the
      settings; the start-up refusals are the runner's, ``check_http_security``).
    - ``metrics``: the process's one registry (the runners make it before bootstrap, for the
      probes answered while starting).
    """

    key_ring: KeyRing | None = None
    clock: Clock | None = None
    ids: IdGenerator | None = None
    tracer: Tracer | None = None
    metrics: PrometheusMetrics | None = None
    store: JobEventStore | None = None
    audit_log: AuditLog | None = None
    checkpoints: CheckpointStore | None = None
    connections: ConnectionRepository | None = None
    job_index: JobTable | None = None
    job_progress: JobProgressStore | None = None
    reader: DatasourceReader | None = None
    host_guard: HostGuard | None = None
    schema_cache: SchemaCache | None = None
    test_limiter: RateLimiter | None = None
    storage: ResultStorage | None = None
    witnesses: WitnessStore | None = None
    work_queue: WorkQueue | None = None
    event_publisher: JobEventPublisher | None = None
    work_consumer: Callable[[WorkHandler], WorkConsumer] | None = None
    worker_id: str | None = None
    run_limits: RunLimits | None = None
    security: HttpSecurity | None = None


NO_OVERRIDES = Overrides()
