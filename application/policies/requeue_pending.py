"""Work orders again for every pending job, for a work queue that does not survive restarts."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from application.ports.clock import Clock
from application.ports.job_index import JobIndex
from application.ports.job_repository import Jobs
from application.ports.messaging import WorkQueue


@dataclass(slots=True)
class RequeuePending:
    """Run once at start-up of the embedded default, whose in-process queue lost what it held
    when the process stopped. A job dispatched twice is harmless: only one claim succeeds."""

    jobs: Jobs
    index: JobIndex
    queue: WorkQueue
    clock: Clock

    async def __call__(self) -> int:
        now = self.clock.now()
        requeued = 0
        for summary in await self.index.stalled(
            now=now, pending_before=now + timedelta(seconds=1), limit=10_000
        ):
            if summary.status != "pending":
                continue
            job = await self.jobs.find(summary.job_id, tenant=summary.tenant)
            if job is None or job.is_terminal:
                continue
            await self.queue.publish(job)
            requeued += 1
        return requeued
