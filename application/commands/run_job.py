"""RunJob: claim a requested job, extract it, store the sealed result, record the outcome."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any
from uuid import UUID

from application.connection_directory import ConnectionDirectory
from application.endpoints import EndpointFactory
from application.errors import CredentialKeyMissing, StorageError
from application.extraction_plan import DatasourcePlan, ExtractionError, plan_datasource
from application.failure_reasons import failure_reason
from application.log_context import log_fields
from application.ports.clock import Clock
from application.ports.datasource_reader import DatasourceReader
from application.ports.job_event_store import JobEventStore
from application.ports.job_progress import JobProgressStore
from application.ports.messaging import Settlement
from application.ports.metrics import NO_METRICS, FailureReason, JobMetrics
from application.ports.result_sealer import ResultSealer
from application.ports.result_storage import ResultStorage
from application.ports.tracer import NO_TRACER, TraceCarrier, Tracer
from application.progress import PROGRESS_INTERVAL_SECONDS, ProgressReporter
from application.result_writer import ResultProgress, WrittenResult, write_result
from application.tasks import first_error
from application.timed_upload import TimedUpload
from domain import job as jobs
from domain.errors import ConcurrencyConflict, FetcherError, InvalidTransition, Unavailable
from domain.job import Job, ResultRef
from domain.redaction import redact
from domain.tenant import SINGLE_TENANT, Tenant

log = logging.getLogger(__name__)

RESULT_KEY = "external-data/{job_id}.json"


def result_key(job: Job) -> str:
    """Where a job's result is stored and what ``resultPath`` reports (the storage adds its
    own prefix): ``external-data/<jobId>.json``, under ``<tenantId>/`` in multi-tenant mode."""
    return job.tenant.key_prefix + RESULT_KEY.format(job_id=job.id)


@dataclass(frozen=True, slots=True)
class RunLimits:
    max_result_bytes: int = 256 * 1024 * 1024
    timeout: float = 300.0
    parallelism: int = 4
    attempts: int = 3
    retry_backoff: float = 1.0
    lease: timedelta | None = None
    """Defaults to ``lease_for`` the other limits; a shorter one is refused."""

    @staticmethod
    def lease_for(timeout: float, attempts: int = 3, retry_backoff: float = 1.0) -> timedelta:
        """A lease that outlasts every attempt with its backoff, plus a minute to record the
        outcome: the reaper must never hand a job to a second worker while the first can
        still be working on it."""
        backoffs = sum(retry_backoff * 2**n for n in range(attempts - 1))
        return timedelta(seconds=attempts * timeout + backoffs + 60)

    def __post_init__(self) -> None:
        needed = self.lease_for(self.timeout, self.attempts, self.retry_backoff)
        if self.lease is None:
            object.__setattr__(self, "lease", needed)
        elif self.lease < needed:
            raise ValueError(f"a lease of {self.lease} is shorter than the work it covers")

    @property
    def claim_lease(self) -> timedelta:
        if self.lease is None:  # set in __post_init__
            raise RuntimeError("lease not set")
        return self.lease


@dataclass(slots=True)
class RunJob:
    """Runs one work order and says how to settle its delivery: ``ACK`` once the job has
    ended (or another worker owns it, or it is unknown), ``REQUEUE`` when its outcome could
    not be recorded. An order naming another tenant than the job's is dropped (``ACK``)
    without a claim. Connections are resolved among the job's tenant's own.

    Every line it logs carries the job's id and request id; its start and end are logged at
    INFO (rows, bytes, duration), its progress every ``progress_interval`` seconds. Its steps
    are spans of one ``job.run`` span, joined to the trace the work message carries."""

    store: JobEventStore
    directory: ConnectionDirectory
    endpoints: EndpointFactory
    reader: DatasourceReader
    sealer: ResultSealer
    storage: ResultStorage
    clock: Clock
    worker_id: str
    limits: RunLimits = field(default_factory=RunLimits)
    tracer: Tracer = field(default=NO_TRACER)
    progress: JobProgressStore | None = None
    progress_interval: float = PROGRESS_INTERVAL_SECONDS
    metrics: JobMetrics = NO_METRICS

    async def __call__(
        self,
        job_id: UUID,
        *,
        tenant: Tenant = SINGLE_TENANT,
        request_id: str = "",
        trace_context: TraceCarrier | None = None,
    ) -> Settlement:
        """``tenant``, ``request_id`` and ``trace_context`` come with the work message; without
        the last two, those recorded with the job are used."""
        with log_fields(job_id=str(job_id), request_id=request_id):
            job = jobs.fold(await self.store.job_events(job_id))
            if job is None:
                log.warning("job.unknown")
                return Settlement.ACK
            if job.tenant != tenant:
                log.warning(
                    "job.tenant.mismatch",
                    extra={"order_tenant": str(tenant), "job_tenant": str(job.tenant)},
                )
                return Settlement.ACK
            with (
                log_fields(request_id=request_id or job.request_id),
                self.tracer.span(
                    "job.run",
                    parent=trace_context or job.trace_context,
                    kind="consumer",
                    attributes={"fetcher.job_id": str(job_id)},
                ),
            ):
                return await self._run(job)

    async def _run(self, job: Job) -> Settlement:
        if job.is_terminal:
            return Settlement.ACK
        try:
            with self.tracer.span("job.claim"):
                claimed = jobs.claim(job, self.worker_id, self.clock.now(), self.limits.claim_lease)
                await self.store.append([claimed])
        except (InvalidTransition, ConcurrencyConflict):
            log.info("job.claim.lost", extra={"reason": "handled by another worker"})
            return Settlement.ACK
        job = jobs.apply(claimed, job)
        log.info("job.started", extra={"attempt": job.attempts, "worker_id": self.worker_id})
        started = time.monotonic()
        progress = ResultProgress()
        reporter = ProgressReporter(self.progress, self.clock, self.progress_interval)
        try:
            async with reporter.reporting(job, progress):
                written = await self._extract_with_retries(job, progress)
        except FetcherError as error:
            reason = failure_reason(error)
            return await self._record_failure(job, redact(error.message), reason, started, progress)
        except Exception:
            log.exception("job.error")
            message = "operation failed: internal error"
            return await self._record_failure(
                job, message, FailureReason.INTERNAL, started, progress
            )
        return await self._record_success(job, written, started)

    async def _extract_with_retries(self, job: Job, progress: ResultProgress) -> WrittenResult:
        for attempt in range(1, self.limits.attempts + 1):
            try:
                return await self._extract(job, progress)
            except (ExtractionError, StorageError) as error:
                transient = isinstance(error, StorageError) or error.category == "unavailable"
                if not transient or attempt == self.limits.attempts:
                    raise
                log.info("job.retrying", extra={"try": attempt, "error": str(error)})
                await asyncio.sleep(self.limits.retry_backoff * 2 ** (attempt - 1))
        raise AssertionError("unreachable")

    async def _extract(self, job: Job, progress: ResultProgress) -> WrittenResult:
        key = result_key(job)
        try:
            async with asyncio.timeout(self.limits.timeout):
                with self.tracer.span("job.plan"):
                    plans = await self._plan(job)
                upload = TimedUpload(await self.storage.begin(key))
                try:
                    with self.tracer.span("job.extract"):
                        written = await write_result(
                            plans,
                            self.reader,
                            self.sealer,
                            upload,
                            self.limits.max_result_bytes,
                            self.limits.parallelism,
                            progress,
                        )
                    with self.tracer.span("job.upload"):
                        await upload.commit()
                except BaseException:
                    await asyncio.shield(upload.abort())
                    raise
                self.metrics.result_uploaded(upload.seconds)
        except TimeoutError:
            raise ExtractionError("timeout", "execution exceeded its deadline") from None
        return written

    async def _plan(self, job: Job) -> list[DatasourcePlan]:
        request = job.request
        names = request.datasource_names
        connections = await self.directory.resolve(names, tenant=job.tenant)
        if any(name not in connections for name in names):
            raise ExtractionError(
                "not_found", "extraction references an unknown datasource connection"
            )
        gate = asyncio.Semaphore(self.limits.parallelism)

        async def plan(name: str) -> DatasourcePlan:
            connection = connections[name]
            try:
                endpoint = self.endpoints.endpoint(connection)
            except CredentialKeyMissing as error:
                raise ExtractionError("precondition", error.message) from error
            filters: Mapping[str, Any] = request.filters.get(name, {})
            async with gate:
                return await plan_datasource(
                    name, connection, endpoint, request.mapped_fields[name], filters, self.reader
                )

        try:
            async with asyncio.TaskGroup() as group:
                tasks = [group.create_task(plan(name)) for name in names]
        except BaseExceptionGroup as group_error:
            raise first_error(group_error) from None
        return [task.result() for task in tasks]

    async def _record_success(self, job: Job, written: WrittenResult, started: float) -> Settlement:
        seconds = time.monotonic() - started
        elapsed_ms = int(seconds * 1000)
        now = self.clock.now()
        ref = ResultRef(
            path=result_key(job),
            size_bytes=written.size_bytes,
            row_count=written.row_count,
            hmac=written.hmac,
        )
        stored = jobs.store_result(job, self.worker_id, ref, now)
        after = jobs.apply(stored, job)
        completed = jobs.complete(after, self.worker_id, now, max(elapsed_ms, 1))
        outcome = {
            "rows": written.row_count,
            "bytes": written.size_bytes,
            "duration_ms": elapsed_ms,
        }

        def count() -> None:
            self.metrics.job_completed(
                seconds=seconds, rows=written.row_count, size_bytes=written.size_bytes
            )

        return await self._append(job, [stored, completed], "job.completed", outcome, count)

    async def _record_failure(
        self,
        job: Job,
        message: str,
        reason: FailureReason,
        started: float,
        progress: ResultProgress,
    ) -> Settlement:
        seconds = time.monotonic() - started
        failed = jobs.fail(job, message, self.clock.now(), self.worker_id)
        outcome = {
            "error": message,
            "rows": progress.rows,
            "bytes": progress.bytes,
            "duration_ms": int(seconds * 1000),
        }
        return await self._append(
            job,
            [failed],
            "job.failed",
            outcome,
            lambda: self.metrics.job_failed(reason, seconds=seconds),
        )

    async def _append(
        self,
        job: Job,
        events: list[Any],
        outcome: str,
        fields: dict[str, Any],
        recorded: Callable[[], None],
    ) -> Settlement:
        """Records the outcome, retrying while the store is unavailable; once recorded, logs
        it as ``outcome`` with ``fields`` and calls ``recorded`` (the metrics)."""
        for attempt in range(self.limits.attempts):
            try:
                with self.tracer.span("job.record"):
                    await self.store.append(events)
            except ConcurrencyConflict:
                log.warning("job.outcome.dropped", extra={"reason": "job changed under worker"})
                return Settlement.ACK
            except Unavailable:
                await asyncio.sleep(self.limits.retry_backoff * 2**attempt)
                continue
            log.info(outcome, extra=fields)
            recorded()
            return Settlement.ACK
        log.warning("job.outcome.unrecorded", extra={"outcome": outcome})
        return Settlement.REQUEUE
