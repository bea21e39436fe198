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
    source: str = ""
    """The request's ``metadata.source`` (empty for jobs projected before it was kept)."""


JOB_STATUSES = ("pending", "processing", "completed", "failed")


@dataclass(frozen=True, slots=True)
class JobSearch:
    """Which jobs of ``tenant`` to list, newest first: each filter that is set must hold.
    ``created_from`` is inclusive, ``created_until`` exclusive; ``older_than`` is the cursor of
    a next page (the ``(created_at, job_id)`` of the last job of the page before)."""

    tenant: Tenant
    status: str | None = None
    source: str | None = None
    config_name: str | None = None
    created_from: datetime | None = None
    created_until: datetime | None = None
    older_than: tuple[datetime, UUID] | None = None
    limit: int = 50


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
    - ``search`` lists a tenant's jobs for the console, filtered, newest first.
    - Unavailability raises ``domain.errors.Unavailable``.
    """

    async def project(self, logged: Sequence[LoggedEvent], *, after: int | None = None) -> int: ...

    async def position(self) -> int: ...

    async def is_connection_in_use(self, config_name: str, *, tenant: Tenant) -> bool: ...

    async def stalled(
        self, *, now: datetime, pending_before: datetime, limit: int = 100
    ) -> list[JobSummary]: ...

    async def search(self, search: JobSearch) -> list[JobSummary]:
        """At most ``search.limit`` jobs matching ``search``, newest first (ties by id,
        descending)."""
        ...

    async def check(self) -> None: ...
