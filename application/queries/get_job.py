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
from domain.job import Job, JobEvent

log = logging.getLogger(__name__)

_ENVELOPE = {"originator_id", "originator_version", "timestamp"}


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    type: str
    version: int
    timestamp: datetime
    facts: dict[str, Any]


def event_type_name(event: JobEvent) -> str:
    return type(event).__name__.removeprefix("Job")


@dataclass(frozen=True, slots=True)
class JobReading:
    job: Job
    progress: JobProgress | None = None
    """Rows and bytes so far, while the job is processing and its worker has reported."""


@dataclass(slots=True)
class GetJob:
    store: JobEventStore
    progress: JobProgressStore | None = None

    async def __call__(self, job_id: UUID) -> Job:
        job = jobs.fold(await self.store.job_events(job_id))
        if job is None:
            raise EntityNotFound("job")
        return job

    async def with_progress(self, job_id: UUID) -> JobReading:
        """The job, and while it is being extracted, the latest progress its current claim
        reported (never an earlier claim's). Progress that cannot be read is left out."""
        job = await self(job_id)
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
    store: JobEventStore

    async def __call__(self, job_id: UUID) -> list[HistoryEntry]:
        events = await self.store.job_events(job_id)
        if not events:
            raise EntityNotFound("job")
        return [
            HistoryEntry(
                type=event_type_name(event),
                version=event.originator_version,
                timestamp=event.timestamp,
                facts={
                    f.name: getattr(event, f.name)
                    for f in dataclasses.fields(event)
                    if f.name not in _ENVELOPE
                },
            )
            for event in events
        ]
