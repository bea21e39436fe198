"""The emitter: ``job.completed``/``job.failed`` for every terminal event on the log."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from uuid import UUID

from eventsourcing.domain import DomainEvent

from application.errors import MessageUnroutable, PublishFailed
from application.log_context import log_fields
from application.policies.publish_attempts import PublishAttempts
from application.ports.job_event_store import LoggedEvent
from application.ports.job_repository import Jobs
from application.ports.messaging import JobEventPublisher
from application.ports.metrics import NO_METRICS, MessageKind, RelayMetrics
from application.ports.tracer import NO_TRACER, Tracer
from domain.job import JobCompleted, JobEvent, JobFailed

FOLLOWER_NAME = "emitter"

REMEMBERED_JOBS = 10_000
"""How many unfinished jobs' events the emitter keeps from the log at most (the oldest go
first; a job it forgot has its history read from the store)."""

log = logging.getLogger(__name__)


@dataclass(slots=True)
class EmitJobEvents:
    """Publishes the event with the request's id, in a ``job.publish`` span joined to the
    request's trace (its context travels in the event's headers).

    The job is folded from its events: those the log showed it (``observe``, called for every
    event in the log's order) when it saw them all from the first, else those the store
    holds."""

    jobs: Jobs
    publisher: JobEventPublisher
    tracer: Tracer = field(default=NO_TRACER)
    metrics: RelayMetrics = NO_METRICS
    remembered_jobs: int = REMEMBERED_JOBS
    _attempts: PublishAttempts = field(init=False)
    _seen: dict[UUID, list[JobEvent]] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self._attempts = PublishAttempts(MessageKind.EVENT, self.metrics)

    def observe(self, logged: LoggedEvent) -> None:
        """Remembers the events of each job the log showed from its first one on, in order."""
        event = logged.event
        if not isinstance(event, JobEvent):
            return
        job_id = event.originator_id
        seen = self._seen.get(job_id)
        if seen is None:
            if event.originator_version != 1:
                return  # its first events came before this follower began
            if len(self._seen) >= self.remembered_jobs:
                del self._seen[next(iter(self._seen))]
            self._seen[job_id] = [event]
        elif event.originator_version == seen[-1].originator_version + 1:
            seen.append(event)
        elif event.originator_version > seen[-1].originator_version:
            del self._seen[job_id]  # a gap: what it knows is not the whole history
        # else: an event seen before, when the log is read again after a failure

    @staticmethod
    def interested(event: DomainEvent) -> bool:
        """Only terminal events are published."""
        return isinstance(event, JobCompleted | JobFailed)

    async def __call__(self, logged: LoggedEvent) -> None:
        event = logged.event
        if not isinstance(event, JobCompleted | JobFailed):
            return
        job = await self.jobs.at_event(event, self._seen.get(event.originator_id, ()))
        with (
            log_fields(job_id=str(job.id), request_id=job.request_id),
            self.tracer.span(
                "job.publish",
                parent=job.trace_context,
                kind="producer",
                attributes={"fetcher.job_id": str(job.id), "fetcher.job_status": job.status},
            ),
        ):
            retried = self._attempts.failed_before(logged.notification_id)
            try:
                with self._attempts.attempt(logged.notification_id):
                    await self.publisher.publish(job, self.tracer.carrier())
            except PublishFailed as error:
                # One line when an event's publishing starts failing; its retries at DEBUG (an
                # unroutable event is told by the publisher, once for its routing key).
                log.log(
                    logging.DEBUG
                    if retried or isinstance(error, MessageUnroutable)
                    else logging.WARNING,
                    "job.event.retrying",
                    extra={"status": job.status, "error": str(error)},
                )
                raise
            log.info("job.event.published", extra={"status": job.status})
        self._seen.pop(job.id, None)
