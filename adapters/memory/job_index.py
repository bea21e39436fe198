"""In-memory twin of the job projection."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from uuid import UUID

from application.jobs.summaries import summarise
from application.ports.job_event_store import LoggedEvent
from application.ports.job_index import JobIndex, JobSearch, JobSummary
from application.ports.job_leases import JobLeases, LeaseHold
from application.ports.job_progress import JobProgress, JobProgressStore
from domain.errors import Unavailable
from domain.tenant import Tenant


class InMemoryJobIndex(JobIndex, JobProgressStore, JobLeases):
    def __init__(self) -> None:
        self.jobs: dict[object, JobSummary] = {}
        self.reports: dict[UUID, JobProgress] = {}
        self.leases: dict[UUID, LeaseHold] = {}
        self._position = 0
        self.unavailable = False

    def _check(self) -> None:
        if self.unavailable:
            raise Unavailable("simulated job index outage")

    async def project(self, logged: Sequence[LoggedEvent], *, after: int | None = None) -> int:
        self._check()
        for item in logged:
            if item.notification_id <= self._position:
                continue
            job_id = item.event.originator_id
            summary = summarise(self.jobs.get(job_id), item.event)
            if summary is not None:
                self.jobs[job_id] = summary
                if summary.status in ("completed", "failed"):
                    self.reports.pop(job_id, None)
                    self.leases.pop(job_id, None)
            self._position = item.notification_id
        return self._position

    async def position(self) -> int:
        self._check()
        return self._position

    async def is_connection_in_use(self, config_name: str, *, tenant: Tenant) -> bool:
        self._check()
        return any(
            s.status in ("pending", "processing")
            and config_name in s.datasources
            and s.tenant == tenant
            for s in self.jobs.values()
        )

    async def stalled(
        self, *, now: datetime, pending_before: datetime, limit: int = 100
    ) -> list[JobSummary]:
        self._check()
        found = [
            s
            for s in sorted(self.jobs.values(), key=lambda s: s.created_at)
            if (s.status == "pending" and s.created_at < pending_before)
            or (s.status == "processing" and self._lease_ended(s, now))
        ]
        return found[:limit]

    async def search(self, search: JobSearch) -> list[JobSummary]:
        self._check()
        found = [s for s in self.jobs.values() if _matches(s, search)]
        found.sort(key=lambda s: (s.created_at, s.job_id), reverse=True)
        return found[: search.limit]

    async def check(self) -> None:
        self._check()

    async def record(self, progress: JobProgress) -> None:
        self._check()
        self.reports[progress.job_id] = progress

    async def progresses(self, job_ids: Collection[UUID]) -> dict[UUID, JobProgress]:
        self._check()
        return {i: self.reports[i] for i in job_ids if i in self.reports}

    def _lease_ended(self, summary: JobSummary, now: datetime) -> bool:
        held = self.leases.get(summary.job_id)
        end = held.until if held and held.attempt >= summary.attempts else summary.lease_until
        return end is not None and end <= now

    async def take(
        self, job_id: UUID, attempt: int, worker_id: str, now: datetime, until: datetime
    ) -> bool:
        self._check()
        held = self.leases.get(job_id)
        if held is not None and (held.attempt >= attempt or held.until > now):
            return False
        self.leases[job_id] = LeaseHold(job_id, attempt, worker_id, until)
        return True

    async def renew(self, job_id: UUID, attempt: int, worker_id: str, until: datetime) -> bool:
        self._check()
        held = self.leases.get(job_id)
        if held is None or (held.attempt, held.worker_id) != (attempt, worker_id):
            return False
        self.leases[job_id] = LeaseHold(job_id, attempt, worker_id, until)
        return True

    async def release(self, job_id: UUID, attempt: int, worker_id: str, now: datetime) -> None:
        await self.renew(job_id, attempt, worker_id, now)

    async def hold(self, job_id: UUID) -> LeaseHold | None:
        self._check()
        return self.leases.get(job_id)


def _matches(summary: JobSummary, search: JobSearch) -> bool:
    return (
        summary.tenant == search.tenant
        and search.status in (None, summary.status)
        and search.source in (None, summary.source)
        and (search.config_name is None or search.config_name in summary.datasources)
        and (search.created_from is None or summary.created_at >= search.created_from)
        and (search.created_until is None or summary.created_at < search.created_until)
        and (search.older_than is None or (summary.created_at, summary.job_id) < search.older_than)
    )
