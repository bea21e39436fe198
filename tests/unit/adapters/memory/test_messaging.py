"""The recording messaging twins of the unit tests: the work queue and job-event publisher
contracts on them, and the failures they play on demand."""

from __future__ import annotations

from uuid import UUID

import pytest

from adapters.memory.messaging import (
    RecordingJobEventPublisher,
    RecordingWorkConsumer,
    RecordingWorkQueue,
)
from application.errors import PublishFailed
from application.ports.messaging import WorkConsumer, WorkHandler, WorkOrder
from tests.contracts.event_publisher import Delivered, JobEventPublisherContract
from tests.contracts.work_queue import ConsumerFactory, WorkQueueContract
from tests.support.jobs import ended_job, requested_job


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
    job = requested_job()

    for _ in range(2):
        with pytest.raises(PublishFailed):
            await queue.publish(job)
    await queue.publish(job)

    assert queue.published == [WorkOrder(job.id, "req-1", tenant=job.tenant)]
    assert queue.attempts == 3


async def test_recording_event_publisher_records_event_ids() -> None:
    publisher = RecordingJobEventPublisher()
    job = ended_job("failed")
    publisher.fail_next()

    with pytest.raises(PublishFailed):
        await publisher.publish(job)
    await publisher.publish(job)
    await publisher.publish(job)

    assert publisher.event_ids == [f"fetcher.job.failed.{job.id}"] * 2
    publisher.unavailable = True
    with pytest.raises(PublishFailed):
        await publisher.check()
