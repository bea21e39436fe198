from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol
from uuid import UUID

from application.ports.tracer import TraceCarrier
from domain.audit_chain import Checkpoint
from domain.job import Job
from domain.tenant import Tenant


@dataclass(frozen=True, slots=True)
class WorkOrder:
    """A request to extract one job, as its consumer reads it from the work message (§4.8).
    ``tenant`` is the job's: its message carries and signs it (``X-Tenant-ID``), except for
    the single tenant, whose messages carry none (as the reference in single-tenant mode)."""

    job_id: UUID
    request_id: str = ""
    """The ``X-Request-Id`` header: the id of the HTTP request that asked for the job."""
    trace_context: dict[str, str] = field(default_factory=dict)
    """The W3C trace headers (``traceparent``, ``tracestate``) the message carries."""
    tenant: Tenant = field(kw_only=True)


class WorkQueue(Protocol):
    """Publishes the work order of a job, signed with the internal key, to the work queue.

    The adapter builds the message, body and headers, from ``job``; it carries
    ``trace_context``, by default the trace recorded with the request. ``publish`` returns
    only after the broker confirmed the message (durable, persistent); otherwise it raises
    ``application.errors.PublishFailed``. At least once: a retried publish may deliver twice,
    and the claim makes that harmless.
    """

    async def publish(self, job: Job, trace_context: TraceCarrier | None = None) -> None: ...

    async def check(self) -> None: ...

    async def close(self) -> None: ...


class Settlement(Enum):
    """What to do with a work delivery once its handler ran."""

    ACK = "ack"
    """Handled, or nothing left to do (the job ended, or another worker owns it): acknowledge."""
    REQUEUE = "requeue"
    """Not now (the outcome could not be recorded): deliver it again after a short delay."""
    DEAD_LETTER = "dead_letter"
    """Never: reject without requeue, so the broker keeps it in the dead-letter queue."""


WorkHandler = Callable[[WorkOrder], Awaitable[Settlement]]
"""Runs one work order and says how to settle its delivery."""


class WorkConsumer(Protocol):
    """Takes work orders off the work queue and hands each to its ``WorkHandler``.

    - Each delivery's signature (internal key) is verified, without an age limit, before its
      body is parsed; a delivery that fails either is dead-lettered and never reaches the
      handler.
    - The handler's ``Settlement`` settles the delivery; a handler that raises has its
      delivery requeued after a bounded backoff (per job), never dropped.
    - ``run()`` consumes until ``stop()``. ``stop()`` takes nothing new, lets in-flight
      handlers finish within the consumer's grace period, returns the rest to the queue, and
      returns once ``run()`` has ended (at once if it never started). Cancelling ``run()``
      drains the same way.
    - Message bodies are never logged.
    """

    async def run(self) -> None: ...

    async def stop(self) -> None: ...


class JobEventPublisher(Protocol):
    """Publishes ``job.completed``/``job.failed`` CloudEvents, signed with the external key.

    ``job`` has ended (its terminal event is the last it holds, so the event's time is its
    ``finished_at``); the adapter builds the event, body and headers, from it, carrying
    ``trace_context``, by default the trace recorded with the request. ``publish`` returns
    only after the broker confirmed a routed, persistent message; otherwise it raises
    ``application.errors.PublishFailed``. The CloudEvents id is
    ``fetcher.job.<status>.<jobId>`` so consumers can drop duplicates.
    """

    async def publish(self, job: Job, trace_context: TraceCarrier | None = None) -> None: ...

    async def publish_checkpoint(self, checkpoint: Checkpoint) -> None:
        """An audit checkpoint, as ``application.ports.audit.CheckpointPublisher`` says."""
        ...

    async def check(self) -> None: ...

    async def close(self) -> None: ...
