"""The recording messaging twins of the unit tests: the work queue and job-event publisher
contracts on them, and the failures they play on demand."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from uuid import UUID, uuid4

import pytest

from adapters.memory.messaging import (
    RecordingJobEventPublisher,
    RecordingWorkConsumer,
    RecordingWorkQueue,
)
from application.errors import PublishFailed
from application.ports.messaging import JobNotification, WorkConsumer, WorkHandler, WorkOrder
from domain.tenant import SINGLE_TENANT
from tests.contracts.event_publisher import Delivered, JobEventPublisherContract
from tests.contracts.work_queue import ConsumerFactory, WorkQueueContract


def _order(job_id: UUID | None = None) -> WorkOrder:
    job_id = job_id or uuid4()
    return WorkOrder(
        job_id=job_id, body=json.dumps({"jobId": str(job_id)}).encode(), tenant=SINGLE_TENANT
    )


def _notification(status: str = "completed") -> JobNotification:
    job_id = uuid4()
    body = f'{{"jobId":"{job_id}","metadata":{{"note":"café <&>"}},"status":"{status}"}}'
    return JobNotification(
        job_id=job_id,
        status=status,
        body=body.encode(),
        time=datetime(2026, 7, 13, 13, 0, tzinfo=UTC),
        request_id="req-1",
        tenant=SINGLE_TENANT,
    )


class RecordingInspector:
    def __init__(self, queue: RecordingWorkQueue) -> None:
        self._queue = queue

    async def waiting(self) -> int:
        return self._queue.waiting.qsize()

    async def dead_lettered(self) -> list[UUID]:
        return [order.job_id for order in self._queue.dead_letters]


class TestRecordingWorkQueue(WorkQueueContract):
    @pytest.fixture
    def queue(self) -> RecordingWorkQueue:
        return RecordingWorkQueue()

    @pytest.fixture
    def broken_queue(self) -> RecordingWorkQueue:
        queue = RecordingWorkQueue()
        queue.unavailable = True
        queue.fail_next(1_000)
        return queue

    @pytest.fixture
    def consumer_for(self, queue: RecordingWorkQueue) -> ConsumerFactory:
        async def make(handler: WorkHandler) -> WorkConsumer:
            return RecordingWorkConsumer(queue, handler, retry_delay=0.02)

        return make

    @pytest.fixture
    def inspector(self, queue: RecordingWorkQueue) -> RecordingInspector:
        return RecordingInspector(queue)


class RecordingEventInspector:
    def __init__(self, publisher: RecordingJobEventPublisher) -> None:
        self._publisher = publisher

    async def delivered(self) -> list[Delivered]:
        bodies = [n.body for n in self._publisher.published]
        return [Delivered(i, b) for i, b in zip(self._publisher.event_ids, bodies, strict=True)]


class TestRecordingJobEventPublisher(JobEventPublisherContract):
    @pytest.fixture
    def publisher(self) -> RecordingJobEventPublisher:
        return RecordingJobEventPublisher()

    @pytest.fixture
    def broken_publisher(self) -> RecordingJobEventPublisher:
        publisher = RecordingJobEventPublisher()
        publisher.unavailable = True
        publisher.fail_next(1_000)
        return publisher

    @pytest.fixture
    def inspector(self, publisher: RecordingJobEventPublisher) -> RecordingEventInspector:
        return RecordingEventInspector(publisher)


async def test_recording_work_queue_fails_the_next_publishes_on_demand() -> None:
    queue = RecordingWorkQueue()
    queue.fail_next(2)
    order = _order()

    for _ in range(2):
        with pytest.raises(PublishFailed):
            await queue.publish(order)
    await queue.publish(order)

    assert queue.published == [order]
    assert queue.attempts == 3


async def test_recording_event_publisher_records_event_ids() -> None:
    publisher = RecordingJobEventPublisher()
    event = _notification("failed")
    publisher.fail_next()

    with pytest.raises(PublishFailed):
        await publisher.publish(event)
    await publisher.publish(event)
    await publisher.publish(replace(event))

    assert publisher.event_ids == [f"fetcher.job.failed.{event.job_id}"] * 2
    publisher.unavailable = True
    with pytest.raises(PublishFailed):
        await publisher.check()
