from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol
from uuid import UUID


@dataclass(frozen=True, slots=True)
class JobProgress:
    """How far a running job has got: rows and result bytes written so far by its current
    claim (``attempt``), as of ``updated_at``."""

    job_id: UUID
    attempt: int
    rows: int
    bytes: int
    updated_at: datetime


class JobProgressStore(Protocol):
    """The latest progress of running jobs, beside the job index (a read model, not the
    event log: progress is recorded every few seconds and losing one report costs nothing).

    - ``record`` keeps the latest report of a job (a newer one replaces it).
    - ``progresses`` returns the latest reports of the jobs asked for, in one read (a job, or
      a page of a list), keyed by job id; a job is absent when none was recorded, or it has
      ended and its report was dropped.
    - Unavailability raises ``domain.errors.Unavailable``.
    """

    async def record(self, progress: JobProgress) -> None: ...

    async def progresses(self, job_ids: Collection[UUID]) -> Mapping[UUID, JobProgress]: ...
