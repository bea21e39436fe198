"""The reaper: no job stays pending or processing forever.

- A processing job whose worker's lease ran out (as last renewed by its heartbeat, in
  ``leases``) is dispatched again, so another worker can reclaim it; after ``max_attempts``
  claims it fails instead.
- A pending job nobody claimed within ``pending_timeout`` fails.
Both failures produce ``job.failed`` through the emitter like any other.

One job that cannot be reaped now (its redispatch cannot be published during a broker
outage, its failure cannot be recorded) is logged and left for the next round; the round
goes on with the jobs after it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from uuid import UUID

from application.jobs.lease import lease_expired
from application.log_context import log_fields
from application.policies.publish_attempts import PublishAttempts
from application.ports.clock import Clock
from application.ports.job_index import JobIndex, JobSummary
from application.ports.job_leases import JobLeases
from application.ports.job_repository import Jobs
from application.ports.messaging import WorkQueue
from application.ports.metrics import NO_METRICS, FailureReason, MessageKind, Metrics
from domain import job as job_rules
from domain.errors import ConcurrencyConflict, FetcherError, InvalidTransition
from domain.job import Job, Phase

log = logging.getLogger(__name__)


@dataclass(slots=True)
class ReapJobs:
    jobs: Jobs
    index: JobIndex
    queue: WorkQueue
    clock: Clock
    pending_timeout: timedelta = timedelta(hours=1)
    max_attempts: int = 3
    redispatch_every: timedelta = timedelta(minutes=5)
    metrics: Metrics = NO_METRICS
    leases: JobLeases | None = None
    """Without it, a claim's lease is the one recorded with the claim."""
    _redispatched: dict[UUID, datetime] = field(default_factory=dict)
    _expiries_seen: dict[UUID, int] = field(default_factory=dict)
    _attempts: PublishAttempts = field(init=False)

    def __post_init__(self) -> None:
        self._attempts = PublishAttempts(MessageKind.WORK_ORDER, self.metrics)

    async def __call__(self) -> int:
        now = self.clock.now()
        self._forget_redispatches_before(now - self.redispatch_every)
        acted = deferred = 0
        stalled = await self.index.stalled(now=now, pending_before=now - self.pending_timeout)
        self._forget_expiries_except({summary.job_id for summary in stalled})
        for summary in stalled:
            with log_fields(job_id=str(summary.job_id)):
                try:
                    acted += await self._look_at(summary, now)
                except (ConcurrencyConflict, InvalidTransition):
                    continue
                except FetcherError as error:
                    log.warning("job.reap.deferred", extra={"error": error.message})
                    deferred += 1
                except Exception:
                    # A bug on one job must not keep every job after it from timing out.
                    log.exception("job.reap.error")
                    deferred += 1
        if deferred:
            log.warning("reaper.round.incomplete", extra={"deferred": deferred, "acted": acted})
        return acted

    async def _look_at(self, summary: JobSummary, now: datetime) -> int:
        job = await self.jobs.find(summary.job_id, tenant=summary.tenant)
        if job is None or job.is_terminal:
            return 0
        hold = None if self.leases is None else await self.leases.hold(job.id)
        expired = lease_expired(job, hold, now)
        if expired:
            self._count_expiry(job)
        with log_fields(request_id=job.request_id):
            return await self._reap(job, now, expired)

    async def _reap(self, job: Job, now: datetime, expired: bool) -> int:
        if job.phase is Phase.REQUESTED:
            minutes = int(self.pending_timeout.total_seconds() // 60)
            message = f"job was not picked up within {minutes} minutes"
            await self._fail(job, message, now, FailureReason.NOT_PICKED_UP)
        elif expired and job.attempts >= self.max_attempts:
            message = f"job abandoned: its worker stopped after {job.attempts} attempts"
            await self._fail(job, message, now, FailureReason.ABANDONED)
        elif expired and self._due(job.id, now):
            with self._attempts.attempt(job.id):
                await self.queue.publish(job)
            self._redispatched[job.id] = now
            self.metrics.job_reclaimed()
            log.info("job.redispatched", extra={"reason": "lease expired"})
        else:
            return 0
        return 1

    def _forget_redispatches_before(self, moment: datetime) -> None:
        """Older entries no longer hold a job back (``_due`` is true for them anyway), so the
        map only keeps jobs redispatched within ``redispatch_every`` instead of growing."""
        for job_id in [j for j, last in self._redispatched.items() if last <= moment]:
            del self._redispatched[job_id]

    def _count_expiry(self, job: Job) -> None:
        """Counts an expired lease once, however many rounds find it."""
        if self._expiries_seen.get(job.id) != job.attempts:
            self._expiries_seen[job.id] = job.attempts
            self.metrics.lease_expired()

    def _forget_expiries_except(self, stalled: set[UUID]) -> None:
        """A job that is no longer stalled was claimed again or ended: its lease is done."""
        for job_id in [j for j in self._expiries_seen if j not in stalled]:
            del self._expiries_seen[job_id]

    def _due(self, job_id: UUID, now: datetime) -> bool:
        last = self._redispatched.get(job_id)
        return last is None or now - last >= self.redispatch_every

    async def _fail(self, job: Job, message: str, now: datetime, reason: FailureReason) -> None:
        await self.jobs.append([job_rules.fail(job, message, now)])
        self.metrics.job_failed(reason)
        log.info("job.reaped", extra={"error": message})
