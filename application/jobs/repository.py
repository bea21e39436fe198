"""The ``Jobs`` repository over the job event store."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from eventsourcing.domain import DomainEvent

from application.ports.job_event_store import JobEventStore
from application.ports.job_repository import JobHistory, Jobs
from domain import dedup
from domain import job as job_rules
from domain.errors import EntityNotFound
from domain.job import Job, JobEvent
from domain.tenant import Tenant


@dataclass(slots=True)
class EventSourcedJobs(Jobs):
    """Each job folded from the events ``store`` holds of it; the tenant is checked here,
    once, for every reader."""

    store: JobEventStore

    async def find(self, job_id: UUID, *, tenant: Tenant) -> Job | None:
        job = job_rules.fold(await self.store.job_events(job_id))
        return job if job is not None and job.tenant == tenant else None

    async def get(self, job_id: UUID, *, tenant: Tenant) -> Job:
        job = await self.find(job_id, tenant=tenant)
        if job is None:
            raise EntityNotFound("job")
        return job

    async def history(self, job_id: UUID, *, tenant: Tenant) -> JobHistory:
        events = await self.store.job_events(job_id)
        job = job_rules.fold(events)
        if job is None or job.tenant != tenant:
            raise EntityNotFound("job")
        return JobHistory(job, events)

    async def as_of(self, job_id: UUID, moment: int | datetime, *, tenant: Tenant) -> Job:
        events = (await self.history(job_id, tenant=tenant)).events
        if isinstance(moment, datetime):
            kept = [e for e in events if e.timestamp <= moment]
        else:
            kept = [e for e in events if e.originator_version <= moment]
        job = job_rules.fold(kept)
        if job is None:
            raise EntityNotFound("job")
        return job

    async def at_event(self, event: JobEvent, known: Sequence[JobEvent] = ()) -> Job:
        version = event.originator_version
        if known and known[0].originator_version == 1 and known[-1].originator_version >= version:
            events: Sequence[JobEvent] = known
        else:
            events = await self.store.job_events(event.originator_id)
        job = job_rules.fold(e for e in events if e.originator_version <= version)
        if job is None:
            raise LookupError(f"job {event.originator_id} has no history")
        return job

    async def slot(self, slot_id: UUID) -> dedup.RequestSlot:
        return dedup.fold_slot(slot_id, await self.store.slot_events(slot_id))

    async def append(self, events: Sequence[DomainEvent]) -> int:
        return await self.store.append(events)
