"""A page of jobs shows the progress of its processing jobs, read at once for the page."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Collection
from datetime import UTC, datetime
from uuid import UUID

import pytest

from adapters.memory.job_index import InMemoryJobIndex
from application.jobs.queries.search_jobs import SearchJobs
from application.ports.job_index import JobSearch, JobSummary
from application.ports.job_progress import JobProgress
from domain.tenant import SINGLE_TENANT

T0 = datetime(2026, 12, 8, 9, 0, tzinfo=UTC)


class CountingIndex(InMemoryJobIndex):
    def __init__(self) -> None:
        super().__init__()
        self.reads: list[set[UUID]] = []

    async def progresses(self, job_ids: Collection[UUID]) -> dict[UUID, JobProgress]:
        self.reads.append(set(job_ids))
        return await super().progresses(job_ids)


def _job(status: str, attempts: int, minute: int) -> JobSummary:
    return JobSummary(
        job_id=uuid.uuid4(),
        status=status,
        datasources=("pgsql",),
        created_at=T0.replace(minute=minute),
        lease_until=None,
        attempts=attempts,
        tenant=SINGLE_TENANT,
    )


@pytest.fixture
def page() -> tuple[CountingIndex, dict[str, JobSummary]]:
    index = CountingIndex()
    jobs = {
        "running": _job("processing", 2, 1),
        "reclaimed": _job("processing", 3, 2),
        "quiet": _job("processing", 1, 3),
        "waiting": _job("pending", 0, 4),
        "done": _job("completed", 1, 5),
    }
    for summary in jobs.values():
        index.jobs[summary.job_id] = summary
    index.reports[jobs["running"].job_id] = JobProgress(jobs["running"].job_id, 2, 10, 100, T0)
    index.reports[jobs["reclaimed"].job_id] = JobProgress(jobs["reclaimed"].job_id, 2, 7, 70, T0)
    index.reports[jobs["done"].job_id] = JobProgress(jobs["done"].job_id, 1, 5, 50, T0)
    return index, jobs


async def test_processing_jobs_show_their_current_claims_progress_from_one_read(page):
    index, jobs = page
    listed = await SearchJobs(index, index)(JobSearch(tenant=SINGLE_TENANT))
    shown = {item.summary.job_id: item.progress for item in listed}
    assert shown == {
        jobs["running"].job_id: index.reports[jobs["running"].job_id],
        jobs["reclaimed"].job_id: None,  # its report is of the claim before
        jobs["quiet"].job_id: None,
        jobs["waiting"].job_id: None,
        jobs["done"].job_id: None,
    }
    processing = {jobs[name].job_id for name in ("running", "reclaimed", "quiet")}
    assert index.reads == [processing]


async def test_a_page_without_processing_jobs_reads_no_progress(page):
    index, _ = page
    listed = await SearchJobs(index, index)(JobSearch(tenant=SINGLE_TENANT, status="completed"))
    assert len(listed) == 1 and listed[0].progress is None
    assert index.reads == []


async def test_progress_that_cannot_be_read_leaves_the_page_listed_with_one_warning(page, caplog):
    index, jobs = page
    listing = SearchJobs(index, InMemoryJobIndex())
    listing.progress.unavailable = True  # type: ignore[union-attr]
    with caplog.at_level(logging.WARNING):
        listed = await listing(JobSearch(tenant=SINGLE_TENANT))
    assert len(listed) == len(jobs)
    assert all(item.progress is None for item in listed)
    warnings = [r for r in caplog.records if r.getMessage() == "job.progress.unreadable"]
    assert len(warnings) == 1 and warnings[0].jobs == 3  # type: ignore[attr-defined]
