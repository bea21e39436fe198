from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol
from uuid import UUID


@dataclass(frozen=True, slots=True)
class LeaseHold:
    """Who holds a job's lease: the worker of claim number ``attempt``, until ``until``."""

    job_id: UUID
    attempt: int
    worker_id: str
    until: datetime


class JobLeases(Protocol):
    """The lease of each running job's current claim: one row per job beside the job index,
    renewed in place by its worker's heartbeat, so a renewal is never an event in the job's
    history. The row is the claim's lock; the event log records the claim itself.

    - ``take`` gives the lease to claim ``attempt`` of ``worker_id`` until ``until`` when no
      claim holds it, or the one that did belongs to an earlier attempt and ended at or before
      ``now``. Atomic: of concurrent takers at most one gets ``True``.
    - ``renew`` moves the end of the lease to ``until`` while that claim still holds it, and
      answers ``False`` once another claim took it (or the job ended and its row was dropped).
    - ``release`` ends the lease at ``now`` if that claim still holds it (the claim is handed
      back, so another worker may take it at once).
    - ``hold`` returns the current holder, or None.
    - Rows of ended jobs are dropped by the projection. Unavailability raises
      ``domain.errors.Unavailable``.
    """

    async def take(
        self, job_id: UUID, attempt: int, worker_id: str, now: datetime, until: datetime
    ) -> bool: ...

    async def renew(self, job_id: UUID, attempt: int, worker_id: str, until: datetime) -> bool: ...

    async def release(self, job_id: UUID, attempt: int, worker_id: str, now: datetime) -> None: ...

    async def hold(self, job_id: UUID) -> LeaseHold | None: ...
