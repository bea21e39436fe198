"""SearchJobs: a tenant's jobs, filtered and newest first, with the progress of running ones."""

from __future__ import annotations

from dataclasses import dataclass, replace

from application.jobs.queries.get_job import current_progress
from application.ports.job_index import JobIndex, JobSearch, JobSummary
from application.ports.job_progress import JobProgress, JobProgressStore

MAX_LIMIT = 100


@dataclass(frozen=True, slots=True)
class ListedJob:
    summary: JobSummary
    progress: JobProgress | None = None
    """Rows and bytes so far, for a processing job whose current claim has reported."""


@dataclass(slots=True)
class SearchJobs:
    index: JobIndex
    progress: JobProgressStore | None = None

    async def __call__(self, search: JobSearch) -> list[ListedJob]:
        limit = max(1, min(search.limit, MAX_LIMIT))
        found = await self.index.search(replace(search, limit=limit))
        claims = {s.job_id: s.attempts for s in found if s.status == "processing"}
        reports = await current_progress(self.progress, claims)
        return [ListedJob(s, reports.get(s.job_id)) for s in found]
