"""Contract of the job-event publisher (``JobEventPublisher``).

A subclass supplies ``publisher`` (working), ``broken_publisher`` (cannot deliver: its exchange
or file is unusable, or it is down) and ``inspector``, which reads what was delivered behind
the adapter and checks each event's signature where the adapter signs.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Protocol

import pytest

from adapters.messaging.wire.events import notification_body
from application.errors import PublishFailed
from application.ports.messaging import JobEventPublisher
from domain.job import Job
from tests.support.jobs import ended_job


@dataclass(frozen=True, slots=True)
class Delivered:
    event_id: str
    body: bytes


class EventInspector(Protocol):
    async def delivered(self) -> list[Delivered]:
        """Every event delivered so far, in order (signatures checked where there are any)."""
        ...


def notification(status: str = "completed") -> Job:
    """A job that has ended, whose event is published."""
    return ended_job(status, request_id="req-9", metadata={"source": "p", "note": "café <&>"})


def delivered_as(job: Job) -> Delivered:
    return Delivered(f"fetcher.job.{job.status}.{job.id}", notification_body(job))


async def _eventually(inspector: EventInspector, count: int) -> list[Delivered]:
    deadline = asyncio.get_running_loop().time() + 10
    while len(found := await inspector.delivered()) < count:
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{count} events expected, {len(found)} delivered")
        await asyncio.sleep(0.02)
    return found


class JobEventPublisherContract:
    async def test_each_event_is_delivered_with_its_exact_body_and_stable_id(
        self, publisher: JobEventPublisher, inspector: EventInspector
    ) -> None:
        events = [notification("completed"), notification("failed")]

        for event in events:
            await publisher.publish(event)

        assert await _eventually(inspector, 2) == [delivered_as(e) for e in events]

    async def test_an_event_published_again_keeps_its_id(
        self, publisher: JobEventPublisher, inspector: EventInspector
    ) -> None:
        event = notification("failed")

        await publisher.publish(event)
        await publisher.publish(event)

        assert await _eventually(inspector, 2) == [delivered_as(event)] * 2

    async def test_check_passes_on_a_working_publisher(self, publisher: JobEventPublisher) -> None:
        await publisher.check()

    async def test_a_publisher_that_cannot_deliver_raises_publish_failed(
        self, broken_publisher: JobEventPublisher
    ) -> None:
        with pytest.raises(PublishFailed):
            await broken_publisher.publish(notification())
        with pytest.raises(PublishFailed):
            await broken_publisher.check()

    async def test_a_closed_publisher_refuses_publishes(
        self, publisher: JobEventPublisher, inspector: EventInspector
    ) -> None:
        await publisher.close()
        with pytest.raises(PublishFailed):
            await publisher.publish(notification())
        assert await inspector.delivered() == []
