"""The emitter: ``job.completed``/``job.failed`` for every terminal event on the log."""

from __future__ import annotations

from dataclasses import dataclass, field

from application.policies.messages import notification_body
from application.policies.publish_attempts import PublishAttempts
from application.ports.job_event_store import JobEventStore, LoggedEvent
from application.ports.messaging import JobEventPublisher, JobNotification
from application.ports.metrics import NO_METRICS, MessageKind, RelayMetrics
from domain import job as jobs
from domain.job import JobCompleted, JobFailed

FOLLOWER_NAME = "emitter"


@dataclass(slots=True)
class EmitJobEvents:
    store: JobEventStore
    publisher: JobEventPublisher
    metrics: RelayMetrics = NO_METRICS
    _attempts: PublishAttempts = field(init=False)

    def __post_init__(self) -> None:
        self._attempts = PublishAttempts(MessageKind.EVENT, self.metrics)

    async def __call__(self, logged: LoggedEvent) -> None:
        event = logged.event
        if not isinstance(event, JobCompleted | JobFailed):
            return
        history = [
            e
            for e in await self.store.job_events(event.originator_id)
            if e.originator_version <= event.originator_version
        ]
        job = jobs.fold(history)
        if job is None:
            raise LookupError(f"job {event.originator_id} has no history")
        with self._attempts.attempt(logged.notification_id):
            await self.publisher.publish(
                JobNotification(
                    job_id=job.id,
                    status=job.status,
                    body=notification_body(job),
                    time=event.timestamp,
                )
            )
