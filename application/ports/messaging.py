from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol
from uuid import UUID


@dataclass(frozen=True, slots=True)
class WorkOrder:
    """A request to extract one job. ``body`` is the reference's work-message JSON (§4.8)."""

    job_id: UUID
    body: bytes
    request_id: str = ""


@dataclass(frozen=True, slots=True)
class JobNotification:
    """A terminal job event to announce. ``body`` is the exact JSON that is signed and sent."""

    job_id: UUID
    status: str
    body: bytes
    time: datetime
    request_id: str = ""


class WorkQueue(Protocol):
    """Publishes work orders, signed with the internal key, to the work queue.

    ``publish`` returns only after the broker confirmed the message (durable, persistent);
    otherwise it raises ``application.errors.PublishFailed``. At least once: a retried publish
    may deliver twice, and the claim makes that harmless.
    """

    async def publish(self, order: WorkOrder) -> None: ...

    async def check(self) -> None: ...

    async def close(self) -> None: ...


class JobEventPublisher(Protocol):
    """Publishes ``job.completed``/``job.failed`` CloudEvents, signed with the external key.

    ``publish`` returns only after the broker confirmed a routed, persistent message;
    otherwise it raises ``application.errors.PublishFailed``. The CloudEvents id is
    ``fetcher.job.<status>.<jobId>`` so consumers can drop duplicates.
    """

    async def publish(self, notification: JobNotification) -> None: ...

    async def check(self) -> None: ...

    async def close(self) -> None: ...
