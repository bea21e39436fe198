"""RunJob: claim a requested job, extract it, store the sealed result, record the outcome."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from application.connections.directory import ConnectionDirectory
from application.connections.endpoints import EndpointFactory
from application.errors import CredentialKeyMissing, StorageError, StorageRejected
from application.jobs.extraction_plan import DatasourcePlan, ExtractionError, plan_datasource
from application.jobs.failure_reasons import failure_reason
from application.jobs.lease import LeaseKeeper, LeaseLost, lease_ends
from application.jobs.progress import PROGRESS_INTERVAL_SECONDS, ProgressReporter
from application.jobs.result_writer import ResultProgress, WrittenResult, write_result
from application.jobs.tasks import first_error
from application.jobs.timed_upload import TimedUpload
from application.log_context import log_fields
from application.outage import Outage
from application.ports.clock import Clock
from application.ports.datasource_reader import DatasourceReader
from application.ports.job_leases import JobLeases
from application.ports.job_progress import JobProgressStore
from application.ports.job_repository import Jobs
from application.ports.messaging import Settlement
from application.ports.metrics import NO_METRICS, FailureReason, JobMetrics
from application.ports.result_sealer import ResultSealer
from application.ports.result_storage import ResultStorage, ResultUpload
from application.ports.tracer import NO_TRACER, TraceCarrier, Tracer
from domain import job as job_rules
from domain.crm import CrmKeys, is_crm, missing_key_entry
from domain.errors import ConcurrencyConflict, FetcherError, InvalidTransition, Unavailable
from domain.job import Job, Phase, ResultRef
from domain.redaction import redact
from domain.tenant import Tenant

log = logging.getLogger(__name__)

RESULT_KEY = "external-data/{job_id}.json"
TAKEOVER_KEY = "external-data/{job_id}.claim-{attempt}.json"


def result_key(job: Job, attempt: int = 1) -> str:
    """Where the claim ``attempt`` of a job writes its result, which ``resultPath`` then
    reports (the storage adds its own prefix), under ``<tenantId>/`` in multi-tenant mode.

    The fence: every claim writes a key of its own, so a claim that lost its lease and
    commits late never replaces the object the winning claim recorded. The first claim (almost
    every job) writes the reference's ``external-data/<jobId>.json``; a later claim, after a
    takeover or a hand-back, ``external-data/<jobId>.claim-<n>.json``."""
    name = RESULT_KEY if attempt <= 1 else TAKEOVER_KEY
    return job.tenant.key_prefix + name.format(job_id=job.id, attempt=attempt)


@dataclass(frozen=True, slots=True)
class RunLimits:
    max_result_bytes: int = 256 * 1024 * 1024
    timeout: float = 300.0
    parallelism: int = 4
    attempts: int = 3
    """Tries of one claim when the datasource is unavailable."""
    retry_backoff: float = 1.0
    lease: timedelta = timedelta(seconds=20)
    """How long a claim holds without a heartbeat: a dead worker's job is taken over after
    at most this long."""
    outage_window: float = 120.0
    """How long a claim rides out its result storage or its database being unavailable
    before it gives up (the job fails, or its outcome is left to a later delivery)."""
    max_backoff: float = 10.0
    watch_interval: float = 1.0
    """How often a worker looks again at a job another worker's lease holds."""

    def __post_init__(self) -> None:
        if self.lease < timedelta(seconds=2):
            raise ValueError("a lease must last at least 2 seconds")

    @property
    def heartbeat(self) -> float:
        """A claim's lease is renewed four times per lease, so one late beat never ends it."""
        return self.lease.total_seconds() / 4

    @property
    def lease_fresh_for(self) -> timedelta:
        """How long after taking or renewing its lease a claim trusts it without asking the
        database again (a quarter of the lease: the rest is the margin for clocks and pauses)."""
        return self.lease / 4

    def backoff(self, tries: int) -> float:
        return float(min(self.retry_backoff * 2 ** min(tries - 1, 16), self.max_backoff))


@dataclass(slots=True)
class RunJob:
    """Runs one work order and says how to settle its delivery: ``ACK`` once the job has
    ended (or another worker owns it, or it is unknown), ``REQUEUE`` when its outcome could
    not be recorded. An order naming another tenant than the job's is dropped (``ACK``)
    without a claim, as an unknown job is. Connections are resolved among the job's tenant's own.

    A claim first takes the job's lease (``JobLeases``), then records ``JobClaimed``; a heartbeat
    renews the lease while the claim works. An order for a job whose lease another worker
    holds waits until that lease is renewed (its holder is alive: ``ACK``) or ends (the job
    is claimed), so a dead worker's redelivered job is taken over one lease after its last
    heartbeat. The lease is confirmed before the result is made visible and before it is
    recorded: a worker that lost it records nothing (a lease taken or renewed less than
    ``RunLimits.lease_fresh_for`` ago is confirmed without a round trip; the record appends at
    the version the claim read, so another worker's claim recorded meanwhile still wins).
    The result storage or the database being
    unavailable is ridden out for ``RunLimits.outage_window``.

    Every line it logs carries the job's id and request id; its start and end are logged at
    INFO (rows, bytes, duration), its progress every ``progress_interval`` seconds. Its steps
    are spans of one ``job.run`` span, joined to the trace the work message carries."""

    jobs: Jobs
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
    leases: JobLeases = field(kw_only=True)
    crm_keys: CrmKeys = field(default_factory=CrmKeys, kw_only=True)
    """The CRM plugin's keys: a job on ``plugin_crm`` that needs one not configured fails."""

    async def __call__(
        self,
        job_id: UUID,
        *,
        tenant: Tenant,
        request_id: str = "",
        trace_context: TraceCarrier | None = None,
    ) -> Settlement:
        """``tenant``, ``request_id`` and ``trace_context`` come with the work message; without
        the last two, those recorded with the job are used."""
        with log_fields(job_id=str(job_id), request_id=request_id):
            job = await self.jobs.find(job_id, tenant=tenant)
            if job is None:
                # Unknown, or of another tenant than the order names: the same to this worker.
                log.warning("job.unknown", extra={"order_tenant": str(tenant)})
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
        with self.tracer.span("job.claim"):
            claim = await self._claim(job)
        if claim is None:
            return Settlement.ACK
        job, attempt, taken_at = claim
        keeper = LeaseKeeper(
            self.leases,
            self.clock,
            job.id,
            attempt,
            self.worker_id,
            self.limits.lease,
            self.limits.heartbeat,
            held_at=taken_at,
            fresh_for=self.limits.lease_fresh_for,
        )
        log.info("job.started", extra={"attempt": job.attempts, "worker_id": self.worker_id})
        started = time.monotonic()
        progress = ResultProgress()
        reporter = ProgressReporter(self.progress, self.clock, self.progress_interval)
        try:
            async with keeper.kept(), reporter.reporting(job, progress):
                if attempt > 1:
                    earlier = [result_key(job, n) for n in range(1, attempt)]
                    await self._discard_abandoned_uploads(earlier)
                written = await self._extract_with_retries(job, attempt, progress, keeper)
        except LeaseLost:
            log.warning("job.abandoned", extra={"reason": "lease taken by another worker"})
            return Settlement.ACK
        except Unavailable:
            log.warning("job.handed_back", extra={"reason": "database unavailable"})
            await keeper.release()
            return Settlement.REQUEUE
        except asyncio.CancelledError:
            log.warning("job.handed_back", extra={"reason": "worker stopping"})
            await asyncio.shield(keeper.release())
            raise
        except FetcherError as error:
            reason = failure_reason(error)
            return await self._record_failure(
                job, keeper, redact(error.message), reason, started, progress
            )
        except Exception:
            log.exception("job.error")
            message = "operation failed: internal error"
            return await self._record_failure(
                job, keeper, message, FailureReason.INTERNAL, started, progress
            )
        return await self._record_success(job, attempt, keeper, written, started)

    async def _claim(self, job: Job) -> tuple[Job, int, datetime] | None:
        """The job as claimed by this worker, the attempt its lease was taken for and when it
        was taken (the lease ends one lease after that); None
        when another worker holds the job (its heartbeat renewed the lease while this one
        watched) or the job ended."""
        if job.phase is Phase.REQUESTED and job.attempts == 0:
            # A job's first claim: no lease row is expected, so the lease is taken without
            # reading the row first (the take fails when a row exists; the loop reads it).
            now = self.clock.now()
            if await self.leases.take(job.id, 1, self.worker_id, now, now + self.limits.lease):
                return await self._record_claim(job, 1, now, None)
        # A watch, not a retry: it ends on the other worker's lease being renewed or ending.
        watched: datetime | None = None
        give_up = time.monotonic() + 2 * self.limits.lease.total_seconds()
        while not job.is_terminal:
            hold = await self.leases.hold(job.id)
            now = self.clock.now()
            ends = lease_ends(job, hold)
            if ends is None or ends <= now:
                attempt = max(job.attempts, hold.attempt if hold else 0) + 1
                until = now + self.limits.lease
                if await self.leases.take(job.id, attempt, self.worker_id, now, until):
                    return await self._record_claim(job, attempt, now, ends)
            elif watched is None:
                watched = ends
                log.info("job.claim.waiting", extra={"reason": "leased by another worker"})
            if (watched is not None and ends is not None and ends > watched) or (
                time.monotonic() >= give_up
            ):
                break
            await asyncio.sleep(self.limits.watch_interval)
            job = await self.jobs.find(job.id, tenant=job.tenant) or job
        log.info("job.claim.lost", extra={"reason": "handled by another worker"})
        return None

    async def _record_claim(
        self, job: Job, attempt: int, now: datetime, ended: datetime | None
    ) -> tuple[Job, int, datetime] | None:
        try:
            claimed = job_rules.claim(job, self.worker_id, now, self.limits.lease, lease_ends=ended)
            await self.jobs.append([claimed])
        except (InvalidTransition, ConcurrencyConflict):
            await self.leases.release(job.id, attempt, self.worker_id, now)
            log.info("job.claim.lost", extra={"reason": "handled by another worker"})
            return None
        return job_rules.apply(claimed, job), attempt, now

    async def _discard_abandoned_uploads(self, keys: list[str], *, quiet: bool = False) -> bool:
        """An earlier claim's worker may have died (or stalled) mid-upload, or one of this
        claim's tries was cut: the incomplete uploads to ``keys`` are aborted now that this
        claim holds the job (so none belongs to a claim that may still record). False when the
        storage could not be asked (logged unless ``quiet``: an outage already said so)."""
        try:
            aborted = 0
            for key in keys:
                aborted += await self.storage.abort_incomplete(key)
        except StorageError as error:
            if not quiet:
                log.warning("job.upload.unswept", extra={"error": str(error)})
            return False
        if aborted:
            log.info("job.upload.swept", extra={"uploads": aborted})
        return True

    async def _extract_with_retries(
        self, job: Job, attempt: int, progress: ResultProgress, keeper: LeaseKeeper
    ) -> WrittenResult:
        """Tries the extraction again while the datasource is unavailable (``attempts``
        tries) and while the result storage is (for ``outage_window`` seconds from its first
        failure, however many tries that takes)."""
        # Hand-written: two retry policies at once (a count for the datasource, a time window
        # for the storage) and a sweep of the cut upload between tries.
        tries = 0
        outage: Outage | None = None
        unswept = False
        while True:
            tries += 1
            try:
                written = await self._extract(job, attempt, progress, keeper)
            except StorageRejected:
                raise
            except StorageError as error:
                outage = outage or Outage("storage", self.limits.outage_window)
                if outage.over():
                    raise
                outage.note(str(error))
                delay = self.limits.backoff(outage.tries)
            except ExtractionError as error:
                if error.category != "unavailable" or tries >= self.limits.attempts:
                    raise
                log.info("job.retrying", extra={"try": tries, "error": str(error)})
                delay = self.limits.retry_backoff * 2 ** (tries - 1)
            else:
                if outage is not None:
                    outage.ended()
                if unswept:
                    # A try's upload the outage cut is still open: this claim's own upload
                    # is complete now, so whatever is still open under the key is not ours.
                    await self._discard_abandoned_uploads([result_key(job, attempt)])
                return written
            progress.rows = progress.bytes = 0
            await asyncio.sleep(delay)
            if outage is not None:
                unswept = not await self._discard_abandoned_uploads(
                    [result_key(job, attempt)], quiet=unswept
                )

    async def _extract(
        self, job: Job, attempt: int, progress: ResultProgress, keeper: LeaseKeeper
    ) -> WrittenResult:
        key = result_key(job, attempt)
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
                        await self._confirm(keeper)
                        await upload.commit()
                except BaseException:
                    await asyncio.shield(_abort(upload))
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
            if is_crm(name, connection.type):
                missing = self.crm_keys.missing(request.mapped_fields[name], filters)
                if missing:
                    entry = missing_key_entry(missing[0])
                    raise ExtractionError("precondition", entry.cite(entry.message))
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

    async def _record_success(
        self,
        job: Job,
        attempt: int,
        keeper: LeaseKeeper,
        written: WrittenResult,
        started: float,
    ) -> Settlement:
        seconds = time.monotonic() - started
        elapsed_ms = int(seconds * 1000)
        now = self.clock.now()
        ref = ResultRef(
            path=result_key(job, attempt),
            size_bytes=written.size_bytes,
            row_count=written.row_count,
            hmac=written.hmac,
        )
        stored = job_rules.store_result(job, self.worker_id, ref, now)
        after = job_rules.apply(stored, job)
        completed = job_rules.complete(after, self.worker_id, now, max(elapsed_ms, 1))
        outcome = {
            "rows": written.row_count,
            "bytes": written.size_bytes,
            "duration_ms": elapsed_ms,
        }

        def count() -> None:
            self.metrics.job_completed(
                seconds=seconds, rows=written.row_count, size_bytes=written.size_bytes
            )

        return await self._append(
            keeper, [stored, completed], "job.completed", outcome, count, written=ref.path
        )

    async def _record_failure(
        self,
        job: Job,
        keeper: LeaseKeeper,
        message: str,
        reason: FailureReason,
        started: float,
        progress: ResultProgress,
    ) -> Settlement:
        seconds = time.monotonic() - started
        failed = job_rules.fail(job, message, self.clock.now(), self.worker_id)
        outcome = {
            "error": message,
            "rows": progress.rows,
            "bytes": progress.bytes,
            "duration_ms": int(seconds * 1000),
        }
        return await self._append(
            keeper,
            [failed],
            "job.failed",
            outcome,
            lambda: self.metrics.job_failed(reason, seconds=seconds),
        )

    async def _append(
        self,
        keeper: LeaseKeeper,
        events: list[Any],
        outcome: str,
        fields: dict[str, Any],
        recorded: Callable[[], None],
        *,
        written: str | None = None,
    ) -> Settlement:
        """Records the outcome if this claim still holds its lease, riding out the database
        being unavailable for ``outage_window``; once recorded, logs it as ``outcome`` with
        ``fields`` and calls ``recorded`` (the metrics). Past the window the delivery is
        requeued, so a later delivery finds the job again (its claim's lease runs out).

        Refused (another claim moved the job on), the object this claim ``written`` under its
        own key is deleted: nothing refers to it, and no other claim writes that key."""
        # Hand-written: past the outage window it settles (REQUEUE) instead of raising, and
        # the outage is logged once, as the extraction's, through ``Outage``.
        outage: Outage | None = None
        while True:
            try:
                await keeper.confirm()
                with self.tracer.span("job.record"):
                    await self.jobs.append(events)
            except (ConcurrencyConflict, LeaseLost):
                log.warning("job.outcome.dropped", extra={"reason": "job changed under worker"})
                if written is not None:
                    await self._withdraw(written)
                return Settlement.ACK
            except Unavailable as error:
                outage = outage or Outage("database", self.limits.outage_window)
                if outage.over():
                    log.warning("job.outcome.unrecorded", extra={"outcome": outcome})
                    return Settlement.REQUEUE
                outage.note(str(error))
                await asyncio.sleep(self.limits.backoff(outage.tries))
                continue
            if outage is not None:
                outage.ended()
            log.info(outcome, extra=fields)
            recorded()
            return Settlement.ACK

    async def _withdraw(self, key: str) -> None:
        """Deletes the object of a claim whose result was not recorded; one that cannot be
        deleted now stays an orphan (the bucket's lifecycle rule removes it)."""
        try:
            await self.storage.delete(key)
        except StorageError as error:
            log.warning("job.result.orphaned", extra={"key": key, "error": str(error)})
            return
        log.info("job.result.withdrawn", extra={"key": key})

    async def _confirm(self, keeper: LeaseKeeper) -> None:
        """Confirms the lease before the result becomes visible, riding out the database
        being unavailable for ``outage_window`` (past it, ``Unavailable`` is raised)."""
        # Hand-written like ``_append``: the same outage window and log lines (``Outage``).
        outage: Outage | None = None
        while True:
            try:
                await keeper.confirm()
            except Unavailable as error:
                outage = outage or Outage("database", self.limits.outage_window)
                if outage.over():
                    raise
                outage.note(str(error))
                await asyncio.sleep(self.limits.backoff(outage.tries))
                continue
            if outage is not None:
                outage.ended()
            return


async def _abort(upload: ResultUpload) -> None:
    """Aborts an upload; one that cannot be aborted now is swept by the job's next claim (or,
    at the latest, by the bucket's lifecycle rule)."""
    try:
        await upload.abort()
    except StorageError as error:
        log.warning("job.upload.unaborted", extra={"error": str(error)})
