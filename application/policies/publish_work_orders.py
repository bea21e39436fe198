"""The dispatcher: publishes a work order for every ``JobRequested`` on the log."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import timedelta

from eventsourcing.domain import DomainEvent

from application.errors import MessageUnroutable, PublishFailed
from application.log_context import log_fields
from application.policies.publish_attempts import PublishAttempts
from application.ports.clock import Clock
from application.ports.job_event_store import LoggedEvent
from application.ports.job_repository import Jobs
from application.ports.messaging import WorkQueue
from application.ports.metrics import NO_METRICS, FailureReason, MessageKind, Metrics
from application.ports.tracer import NO_TRACER, Tracer
from domain import job as job_rules
from domain.errors import ConcurrencyConflict, InvalidTransition
from domain.job import Job, JobRequested
from domain.tenant import Tenant

FOLLOWER_NAME = "dispatcher"
"""The follower's tracked position is stored under this name: never change it."""
DISPATCH_FAILED = "process failed: unable to publish"

log = logging.getLogger(__name__)


@dataclass(slots=True)
class PublishWorkOrders:
    """Publishes the work order; a publish that keeps failing is retried by the follower until
    ``deadline`` after the request, then the job fails (and ``job.failed`` is emitted).

    The order carries the request's id and, in a ``job.dispatch`` span joined to the request's
    trace, the trace context the worker continues."""

    jobs: Jobs
    queue: WorkQueue
    clock: Clock
    deadline: timedelta = timedelta(minutes=10)
    tracer: Tracer = field(default=NO_TRACER)
    metrics: Metrics = NO_METRICS
    _attempts: PublishAttempts = field(init=False)

    def __post_init__(self) -> None:
        self._attempts = PublishAttempts(MessageKind.WORK_ORDER, self.metrics)

    @staticmethod
    def interested(event: DomainEvent) -> bool:
        """Only requests are dispatched."""
        return isinstance(event, JobRequested)

    async def __call__(self, logged: LoggedEvent) -> None:
        event = logged.event
        if not isinstance(event, JobRequested):
            return
        job = await self.jobs.find(event.originator_id, tenant=Tenant(event.tenant))
        if job is None or job.is_terminal or job.version > 1:
            return
        with log_fields(job_id=str(job.id), request_id=job.request_id):
            await self._dispatch(job)

    async def _dispatch(self, job: Job) -> None:
        retried = self._attempts.failed_before(job.id)
        try:
            with (
                self.tracer.span(
                    "job.dispatch",
                    parent=job.trace_context,
                    kind="producer",
                    attributes={"fetcher.job_id": str(job.id)},
                ),
                self._attempts.attempt(job.id),
            ):
                await self.queue.publish(job, self.tracer.carrier())
        except PublishFailed as error:
            now = self.clock.now()
            if now - job.created_at < self.deadline:
                # One line when a job's publishing starts failing; its retries at DEBUG (an
                # unroutable order is told by the publisher, once for its queue).
                log.log(
                    logging.DEBUG
                    if retried or isinstance(error, MessageUnroutable)
                    else logging.WARNING,
                    "job.dispatch.retrying",
                    extra={"error": str(error)},
                )
                raise
            self._attempts.forget(job.id)
            log.warning("job.dispatch.failed", extra={"error": str(error)})
            try:
                await self.jobs.append([job_rules.fail(job, DISPATCH_FAILED, now)])
            except (ConcurrencyConflict, InvalidTransition):
                return
            self.metrics.job_failed(FailureReason.DISPATCH)
            return
        log.info("job.dispatched")
