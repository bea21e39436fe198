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
from application.ports.clock import Clock
from application.ports.datasource_reader import DatasourceReader
from application.ports.job_event_store import JobEventStore
from application.ports.messaging import Settlement
from application.ports.metrics import NO_METRICS, FailureReason, JobMetrics
from application.ports.result_sealer import ResultSealer
from application.ports.result_storage import ResultStorage
from application.result_writer import WrittenResult, write_result
from application.tasks import first_error
from application.timed_upload import TimedUpload
from domain import job as jobs
from domain.errors import ConcurrencyConflict, FetcherError, InvalidTransition, Unavailable
from domain.job import Job, ResultRef
from domain.redaction import redact

log = logging.getLogger(__name__)

RESULT_KEY = "external-data/{job_id}.json"


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
    not be recorded."""

    store: JobEventStore
    directory: ConnectionDirectory
    endpoints: EndpointFactory
    reader: DatasourceReader
    sealer: ResultSealer
    storage: ResultStorage
    clock: Clock
    worker_id: str
    limits: RunLimits = field(default_factory=RunLimits)
    metrics: JobMetrics = NO_METRICS

    async def __call__(self, job_id: UUID) -> Settlement:
        job = jobs.fold(await self.store.job_events(job_id))
        if job is None:
            log.warning("work order for unknown job %s dropped", job_id)
            return Settlement.ACK
        if job.is_terminal:
            return Settlement.ACK
        try:
            claimed = jobs.claim(job, self.worker_id, self.clock.now(), self.limits.claim_lease)
            await self.store.append([claimed])
        except (InvalidTransition, ConcurrencyConflict):
            log.info("job %s is being handled by another worker", job_id)
            return Settlement.ACK
        job = jobs.apply(claimed, job)
        started = time.monotonic()
        try:
            written = await self._extract_with_retries(job)
        except FetcherError as error:
            reason = failure_reason(error)
            return await self._record_failure(job, redact(error.message), reason, started)
        except Exception:
            log.exception("job %s failed unexpectedly", job_id)
            message = "operation failed: internal error"
            return await self._record_failure(job, message, FailureReason.INTERNAL, started)
        return await self._record_success(job, written, started)

    async def _extract_with_retries(self, job: Job) -> WrittenResult:
        for attempt in range(1, self.limits.attempts + 1):
            try:
                return await self._extract(job)
            except (ExtractionError, StorageError) as error:
                transient = isinstance(error, StorageError) or error.category == "unavailable"
                if not transient or attempt == self.limits.attempts:
                    raise
                log.info("job %s attempt %d failed transiently: %s", job.id, attempt, error)
                await asyncio.sleep(self.limits.retry_backoff * 2 ** (attempt - 1))
        raise AssertionError("unreachable")

    async def _extract(self, job: Job) -> WrittenResult:
        key = RESULT_KEY.format(job_id=job.id)
        try:
            async with asyncio.timeout(self.limits.timeout):
                plans = await self._plan(job)
                upload = TimedUpload(await self.storage.begin(key))
                try:
                    written = await write_result(
                        plans,
                        self.reader,
                        self.sealer,
                        upload,
                        self.limits.max_result_bytes,
                        self.limits.parallelism,
                    )
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
        connections = await self.directory.resolve(names)
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
            path=RESULT_KEY.format(job_id=job.id),
            size_bytes=written.size_bytes,
            row_count=written.row_count,
            hmac=written.hmac,
        )
        stored = jobs.store_result(job, self.worker_id, ref, now)
        after = jobs.apply(stored, job)
        completed = jobs.complete(after, self.worker_id, now, max(elapsed_ms, 1))

        def count() -> None:
            self.metrics.job_completed(
                seconds=seconds, rows=written.row_count, size_bytes=written.size_bytes
            )

        return await self._append(job, [stored, completed], count)

    async def _record_failure(
        self, job: Job, message: str, reason: FailureReason, started: float
    ) -> Settlement:
        log.info("job %s failed: %s", job.id, message)
        seconds = time.monotonic() - started
        failed = jobs.fail(job, message, self.clock.now(), self.worker_id)
        return await self._append(
            job, [failed], lambda: self.metrics.job_failed(reason, seconds=seconds)
        )

    async def _append(
        self, job: Job, events: list[Any], recorded: Callable[[], None]
    ) -> Settlement:
        """Records the outcome (``recorded`` is called once it is), retrying while the
        store is unavailable."""
        for attempt in range(self.limits.attempts):
            try:
                await self.store.append(events)
                recorded()
                return Settlement.ACK
            except ConcurrencyConflict:
                log.warning("job %s changed under this worker; outcome dropped", job.id)
                return Settlement.ACK
            except Unavailable:
                await asyncio.sleep(self.limits.retry_backoff * 2**attempt)
        return Settlement.REQUEUE
