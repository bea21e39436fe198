from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol
from uuid import UUID

from eventsourcing.domain import DomainEvent

from domain.dedup import RequestSlot
from domain.job import Job, JobEvent
from domain.tenant import Tenant


@dataclass(frozen=True, slots=True)
class JobHistory:
    """A job and the events it was rebuilt from, in order."""

    job: Job
    events: list[JobEvent]


class Jobs(Protocol):
    """The jobs of every tenant, each rebuilt from its own events (the authority).

    Contract:
    - A job is read *for a tenant*: a job of another tenant is not there (``find`` answers
      None, ``get`` and ``history`` raise ``domain.errors.EntityNotFound``, FET-1001), so an
      id tells nothing about other tenants' jobs.
    - ``as_of`` is the job as it was at a version, or at a time (not found when it did not
      exist yet).
    - ``at_event`` is the job as it was once ``event`` was recorded, for the relay's policies,
      which act on the jobs of every tenant as the log shows them: ``known`` are the job's
      events the caller already holds (from its first on); the store is read when they do not
      reach ``event``.
    - ``slot`` is the request slot of a request hash (``domain.dedup``), which deduplicates
      the requests of one tenant.
    - ``append`` records job and slot events in one transaction or none of them; a version
      already taken raises ``domain.errors.ConcurrencyConflict`` (the optimistic lock).
    - Unavailability raises ``domain.errors.Unavailable``.
    """

    async def find(self, job_id: UUID, *, tenant: Tenant) -> Job | None: ...

    async def get(self, job_id: UUID, *, tenant: Tenant) -> Job: ...

    async def history(self, job_id: UUID, *, tenant: Tenant) -> JobHistory: ...

    async def as_of(self, job_id: UUID, moment: int | datetime, *, tenant: Tenant) -> Job: ...

    async def at_event(self, event: JobEvent, known: Sequence[JobEvent] = ()) -> Job: ...

    async def slot(self, slot_id: UUID) -> RequestSlot: ...

    async def append(self, events: Sequence[DomainEvent]) -> int: ...
