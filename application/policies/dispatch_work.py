"""The dispatcher: a work order for every ``JobRequested`` on the log."""

from __future__ import annotations

from dataclasses import dataclass

from application.policies.messages import work_order_body
from application.ports.job_event_store import JobEventStore, LoggedEvent
from application.ports.messaging import WorkOrder, WorkQueue
from domain import job as jobs
from domain.job import JobRequested

FOLLOWER_NAME = "dispatcher"


@dataclass(slots=True)
class DispatchWork:
    store: JobEventStore
    queue: WorkQueue

    async def __call__(self, logged: LoggedEvent) -> None:
        event = logged.event
        if not isinstance(event, JobRequested):
            return
        job = jobs.fold([event])
        assert job is not None
        current = jobs.fold(await self.store.job_events(job.id))
        if current is not None and current.is_terminal:
            return
        await self.queue.publish(WorkOrder(job_id=job.id, body=work_order_body(job)))
