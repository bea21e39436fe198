"""The request slot: one per request hash, pointing at the newest job asked for with that hash.

A new job and the slot's next event are recorded in one transaction; the event store's
uniqueness on (slot id, version) then guarantees that concurrent identical requests create
exactly one job.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID, uuid5

from eventsourcing.domain import DomainEvent

from domain.tenant import Tenant

SLOT_NAMESPACE = UUID("3d0c7a53-56f5-4b8e-9a3e-5a0f6c1e2b7d")


@dataclass(frozen=True)
class RequestSlotTaken(DomainEvent):
    job_id: UUID


@dataclass(frozen=True, slots=True)
class RequestSlot:
    id: UUID
    version: int
    job_id: UUID | None


def slot_id(request_hash: str, tenant: Tenant) -> UUID:
    """The slot of a request hash within a tenant: over the hash alone for the single tenant
    (as before tenants existed), over ``<tenantId>/<hash>`` for any other, so identical
    requests of two tenants never share a job."""
    return uuid5(SLOT_NAMESPACE, f"{tenant.id}/{request_hash}" if tenant.id else request_hash)


def fold_slot(slot_id_: UUID, events: Iterable[RequestSlotTaken]) -> RequestSlot:
    slot = RequestSlot(id=slot_id_, version=0, job_id=None)
    for event in events:
        slot = RequestSlot(id=slot.id, version=event.originator_version, job_id=event.job_id)
    return slot


def take(slot: RequestSlot, job_id: UUID, now: datetime) -> RequestSlotTaken:
    return RequestSlotTaken(
        originator_id=slot.id, originator_version=slot.version + 1, timestamp=now, job_id=job_id
    )
