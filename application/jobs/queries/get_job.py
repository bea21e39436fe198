"""GetJob and GetJobHistory: one job rebuilt from its own events (the authority)."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from application.ports.job_progress import JobProgress, JobProgressStore
from application.ports.job_repository import Jobs
from domain.errors import Unavailable
from domain.job import Job, JobEvent, JobRequested
from domain.tenant import Tenant

log = logging.getLogger(__name__)

_ENVELOPE = {"originator_id", "originator_version", "timestamp"}


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    type: str
    version: int
    timestamp: datetime
    facts: dict[str, Any]
    digest: str = ""
    """The event's digest (empty for an event recorded before chaining)."""
    prev_digest: str = ""
    """The digest of the version before it, that this event links to (empty for the first)."""


def event_type_name(event: JobEvent) -> str:
    return type(event).__name__.removeprefix("Job")


@dataclass(frozen=True, slots=True)
class JobReading:
    job: Job
    progress: JobProgress | None = None
    """Rows and bytes so far, while the job is processing and its worker has reported."""


def _facts(event: JobEvent) -> dict[str, Any]:
    facts = {
        f.name: getattr(event, f.name) for f in dataclasses.fields(event) if f.name not in _ENVELOPE
    }
    if isinstance(event, JobRequested) and not event.tenant:
        del facts["tenant"]  # the single tenant's history reads as before tenants existed
    return facts


@dataclass(slots=True)
class GetJob:
    """A job of ``tenant``, rebuilt from its events; 404 FET-1001 otherwise."""

    jobs: Jobs
    progress: JobProgressStore | None = None

    async def __call__(self, job_id: UUID, *, tenant: Tenant) -> Job:
        return await self.jobs.get(job_id, tenant=tenant)

    async def as_of(self, job_id: UUID, as_of: int | datetime, *, tenant: Tenant) -> Job:
        """The job of ``tenant`` as it was at a version, or at a time, rebuilt from the events
        up to it; 404 FET-1001 when it did not exist yet."""
        return await self.jobs.as_of(job_id, as_of, tenant=tenant)

    async def with_progress(self, job_id: UUID, *, tenant: Tenant) -> JobReading:
        """The job of ``tenant``, and while it is being extracted, the latest progress its
        current claim reported (never an earlier claim's). Progress that cannot be read is
        left out."""
        job = await self(job_id, tenant=tenant)
        claims = {job.id: job.attempts} if job.status == "processing" else {}
        return JobReading(job, (await current_progress(self.progress, claims)).get(job.id))


async def current_progress(
    store: JobProgressStore | None, claims: Mapping[UUID, int]
) -> dict[UUID, JobProgress]:
    """What processing jobs' current claims last reported, read at once: ``claims`` maps each
    processing job to its current claim (its ``attempts``). A job is absent when its report
    is of an earlier claim, or there is none; all are when progress cannot be read (one
    warning for them all)."""
    if store is None or not claims:
        return {}
    try:
        reports = await store.progresses(claims.keys())
    except Unavailable:
        log.warning("job.progress.unreadable", extra={"jobs": len(claims)})
        return {}
    return {job_id: p for job_id, p in reports.items() if p.attempt == claims.get(job_id)}


@dataclass(slots=True)
class GetJobHistory:
    """The events of a job of ``tenant``, in order; 404 FET-1001 otherwise."""

    jobs: Jobs

    async def __call__(self, job_id: UUID, *, tenant: Tenant) -> list[HistoryEntry]:
        events = (await self.jobs.history(job_id, tenant=tenant)).events
        return [
            HistoryEntry(
                type=event_type_name(event),
                version=event.originator_version,
                timestamp=event.timestamp,
                facts=_facts(event),
                digest=event.digest,
                prev_digest=event.prev_digest,
            )
            for event in events
        ]
