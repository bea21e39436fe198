"""GetJob and GetJobHistory: one job rebuilt from its own events (the authority)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from application.ports.job_event_store import JobEventStore
from domain import job as jobs
from domain.errors import EntityNotFound
from domain.job import Job, JobEvent

_ENVELOPE = {"originator_id", "originator_version", "timestamp"}


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    type: str
    version: int
    timestamp: datetime
    facts: dict[str, Any]


def event_type_name(event: JobEvent) -> str:
    return type(event).__name__.removeprefix("Job")


@dataclass(slots=True)
class GetJob:
    store: JobEventStore

    async def __call__(self, job_id: UUID) -> Job:
        job = jobs.fold(await self.store.job_events(job_id))
        if job is None:
            raise EntityNotFound("job")
        return job


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
