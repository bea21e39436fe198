from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol
from uuid import UUID

from application.ports.job_event_store import LoggedEvent
from domain.tenant import Tenant


@dataclass(frozen=True, slots=True)
class JobSummary:
    job_id: UUID
    status: str
    """``pending``, ``processing``, ``completed`` or ``failed``."""
    datasources: tuple[str, ...]
    created_at: datetime
    lease_until: datetime | None
    attempts: int
    tenant: Tenant


class JobIndex(Protocol):
    """The job projection: a read model of every job's status and datasources, fed from the
    event store's notification log.

    - ``project`` applies a batch of logged events (ignoring those that are not job events)
      and records the last notification id as its position **in the same transaction**, so
      the read model and its position never disagree. Replaying an already-applied batch is
      harmless. It answers its position after the batch. ``after``, when given, is the
      position the caller believes current (the batch follows it); it is checked in the
      transaction, and a wrong belief only costs the projection a read of its position.
    - ``is_connection_in_use`` answers whether a pending or processing job of ``tenant`` reads
      the datasource with that config name (FET-1021 on PATCH/DELETE of a connection); jobs
      of other tenants never count.
    - Each summary records the tenant that requested the job.
    - ``stalled`` lists jobs that need the reaper: pending jobs created before
      ``pending_before``, and processing jobs whose lease ended at or before ``now``.
    - Unavailability raises ``domain.errors.Unavailable``.
    """

    async def project(self, logged: Sequence[LoggedEvent], *, after: int | None = None) -> int: ...

    async def position(self) -> int: ...

    async def is_connection_in_use(self, config_name: str, *, tenant: Tenant) -> bool: ...

    async def stalled(
        self, *, now: datetime, pending_before: datetime, limit: int = 100
    ) -> list[JobSummary]: ...

    async def check(self) -> None: ...
