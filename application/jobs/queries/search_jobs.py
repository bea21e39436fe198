"""SearchJobs: a tenant's jobs, filtered and newest first, with the progress of running ones."""

from __future__ import annotations

from dataclasses import dataclass, replace

from application.ports.job_index import JobIndex, JobSearch, JobSummary
from application.ports.job_progress import JobProgress, JobProgressStore
from domain.errors import Unavailable

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
        return [ListedJob(summary, await self._progress_of(summary)) for summary in found]

    async def _progress_of(self, summary: JobSummary) -> JobProgress | None:
        if self.progress is None or summary.status != "processing":
            return None
        try:
            progress = await self.progress.progress(summary.job_id)
        except Unavailable:
            return None
        if progress is None or progress.attempt != summary.attempts:
            return None
        return progress
