"""Reporting a running job's progress: every few seconds, a ``job.progress`` log line and the
latest rows and bytes in the ``JobProgressStore`` (which ``GET /v1/fetcher/{id}`` shows)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from application.jobs.result_writer import ResultProgress
from application.ports.clock import Clock
from application.ports.job_progress import JobProgress, JobProgressStore
from domain.job import Job

log = logging.getLogger(__name__)

PROGRESS_INTERVAL_SECONDS = 5.0


@dataclass(slots=True)
class ProgressReporter:
    store: JobProgressStore | None
    clock: Clock
    interval: float = PROGRESS_INTERVAL_SECONDS

    @contextlib.asynccontextmanager
    async def reporting(self, job: Job, progress: ResultProgress) -> AsyncIterator[None]:
        """Reports ``progress`` every ``interval`` seconds while the block runs. A report
        that cannot be recorded is skipped: progress never fails a job."""
        task = asyncio.create_task(self._report(job, progress, time.monotonic()))
        try:
            yield
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _report(self, job: Job, progress: ResultProgress, started: float) -> None:
        while True:
            await asyncio.sleep(self.interval)
            rows, size = progress.rows, progress.bytes
            elapsed_ms = int((time.monotonic() - started) * 1000)
            log.info("job.progress", extra={"rows": rows, "bytes": size, "duration_ms": elapsed_ms})
            if self.store is None:
                continue
            report = JobProgress(job.id, job.attempts, rows, size, self.clock.now())
            try:
                await self.store.record(report)
            except Exception as error:
                log.warning("job.progress.unrecorded", extra={"error": type(error).__name__})
