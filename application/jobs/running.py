"""The jobs a worker runs, each in a task the worker owns.

A delivery's handler runs in a task its consumer owns, and a consumer cancels those when its
channel closes (the AMQP client does so on a broker outage). The extraction needs the
database and the storage, not the broker, so it runs in a task of its own: cancelling the
delivery's handler leaves the job running (one log line says so), its lease kept by its
heartbeat. The delivery returns to the queue with the closed channel; when it comes back
while the job still runs here, it waits for that same run and is settled by its outcome, and
once the job has ended it is acknowledged without effect (the job is terminal).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from uuid import UUID

from application.ports.messaging import Settlement, WorkHandler, WorkOrder

log = logging.getLogger(__name__)


class RunningJobs:
    """Wraps the worker's handler: one run per job at a time, shielded from the delivery's
    cancellation. ``stop`` cancels the runs still going (each hands its claim back)."""

    def __init__(self, handler: WorkHandler) -> None:
        self._handler = handler
        self._runs: dict[UUID, asyncio.Task[Settlement]] = {}

    def __len__(self) -> int:
        return len(self._runs)

    async def __call__(self, order: WorkOrder) -> Settlement:
        run = self._runs.get(order.job_id)
        if run is None:
            run = asyncio.create_task(self._run(order), name=f"job-{order.job_id}")
            self._runs[order.job_id] = run
            run.add_done_callback(lambda _: self._forget(order.job_id, run))
        else:
            log.info("job.delivery.joined", extra={"reason": "the job already runs here"})
        try:
            return await asyncio.shield(run)
        except asyncio.CancelledError:
            if not run.done():
                log.warning(
                    "job.delivery.cancelled",
                    extra={"reason": "its consumer stopped; the job runs on"},
                )
            raise

    async def _run(self, order: WorkOrder) -> Settlement:
        return await self._handler(order)

    async def stop(self, grace: float = 0.0) -> None:
        """Lets the runs finish for ``grace`` seconds, then cancels the rest."""
        runs = set(self._runs.values())
        if not runs:
            return
        _, late = await asyncio.wait(runs, timeout=grace) if grace > 0 else (set(), runs)
        for run in late:
            run.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*late, return_exceptions=True)

    def _forget(self, job_id: UUID, run: asyncio.Task[Settlement]) -> None:
        if self._runs.get(job_id) is run:
            del self._runs[job_id]
