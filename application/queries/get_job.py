"""GetJob and GetJobHistory: one job rebuilt from its own events (the authority)."""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from application.ports.job_event_store import JobEventStore
from application.ports.job_progress import JobProgress, JobProgressStore
from domain import job as jobs
from domain.errors import EntityNotFound, Unavailable
from domain.job import Job, JobEvent, JobRequested
from domain.tenant import SINGLE_TENANT, Tenant

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


async def tenant_job_events(
    store: JobEventStore, job_id: UUID, tenant: Tenant
) -> tuple[Job, list[JobEvent]]:
    """A job of ``tenant`` and its events; 404 FET-1001 when there is none, or the job is of
    another tenant (ids tell nothing about other tenants' jobs)."""
    events = await store.job_events(job_id)
    job = jobs.fold(events)
    if job is None or job.tenant != tenant:
        raise EntityNotFound("job")
    return job, events


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

    store: JobEventStore
    progress: JobProgressStore | None = None

    async def __call__(self, job_id: UUID, *, tenant: Tenant = SINGLE_TENANT) -> Job:
        job, _ = await tenant_job_events(self.store, job_id, tenant)
        return job

    async def as_of(
        self, job_id: UUID, as_of: int | datetime, *, tenant: Tenant = SINGLE_TENANT
    ) -> Job:
        """The job of ``tenant`` as it was at a version, or at a time, rebuilt from the events
        up to it; 404 FET-1001 when it did not exist yet."""
        _, events = await tenant_job_events(self.store, job_id, tenant)
        if isinstance(as_of, datetime):
            kept = [e for e in events if e.timestamp <= as_of]
        else:
            kept = [e for e in events if e.originator_version <= as_of]
        job = jobs.fold(kept)
        if job is None:
            raise EntityNotFound("job")
        return job

    async def with_progress(self, job_id: UUID, *, tenant: Tenant = SINGLE_TENANT) -> JobReading:
        """The job of ``tenant``, and while it is being extracted, the latest progress its
        current claim reported (never an earlier claim's). Progress that cannot be read is
        left out."""
        job = await self(job_id, tenant=tenant)
        if self.progress is None or job.status != "processing":
            return JobReading(job)
        try:
            progress = await self.progress.progress(job.id)
        except Unavailable:
            log.warning("job.progress.unreadable")
            return JobReading(job)
        if progress is None or progress.attempt != job.attempts:
            return JobReading(job)
        return JobReading(job, progress)


@dataclass(slots=True)
class GetJobHistory:
    """The events of a job of ``tenant``, in order; 404 FET-1001 otherwise."""

    store: JobEventStore

    async def __call__(self, job_id: UUID, *, tenant: Tenant = SINGLE_TENANT) -> list[HistoryEntry]:
        _, events = await tenant_job_events(self.store, job_id, tenant)
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
