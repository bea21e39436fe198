"""The work queue and job-event publisher contracts on the in-process, embedded and recording
twins (RabbitMQ runs the same contracts in ``tests/integration``)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from uuid import UUID

import pytest

from adapters.memory.messaging import (
    RecordingJobEventPublisher,
    RecordingWorkConsumer,
    RecordingWorkQueue,
)
from adapters.messaging.envelope import header_text
from adapters.messaging.local import (
    InProcessWorkConsumer,
    InProcessWorkQueue,
    JsonlJobEventPublisher,
)
from application.ports.messaging import WorkConsumer, WorkHandler
from tests.contracts.event_publisher import Delivered, JobEventPublisherContract
from tests.contracts.work_queue import ConsumerFactory, WorkQueueContract
from tests.support.signing import HmacTestSigner

SOURCE = "//lerian.fetcher/worker"
FAST = {"retry_delay": 0.02, "error_backoff": 0.02, "max_backoff": 0.02}


class InProcessInspector:
    def __init__(self, queue: InProcessWorkQueue) -> None:
        self._queue = queue

    async def waiting(self) -> int:
        return self._queue.messages.qsize()

    async def dead_lettered(self) -> list[UUID]:
        return [UUID(header_text(m.headers["jobId"])) for m in self._queue.dead_letters]


class TestInProcessWorkQueue(WorkQueueContract):
    @pytest.fixture
    def queue(self) -> InProcessWorkQueue:
        return InProcessWorkQueue(HmacTestSigner())

    @pytest.fixture
    async def broken_queue(self) -> InProcessWorkQueue:
        queue = InProcessWorkQueue(HmacTestSigner())
        await queue.close()
        return queue

    @pytest.fixture
    def consumer_for(self, queue: InProcessWorkQueue) -> ConsumerFactory:
        async def make(handler: WorkHandler) -> WorkConsumer:
            return InProcessWorkConsumer(queue, HmacTestSigner(), handler, **FAST)

        return make

    @pytest.fixture
    def inspector(self, queue: InProcessWorkQueue) -> InProcessInspector:
        return InProcessInspector(queue)


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


class JsonlInspector:
    """Reads the events file back and checks every line's signature."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._signer = HmacTestSigner()

    async def delivered(self) -> list[Delivered]:
        if not self._path.exists():
            return []
        found = []
        for line in self._path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            body = record["body"].encode("utf-8")
            self._signer.verify(
                headers=record["headers"],
                exchange=record["exchange"],
                routing_key=record["routingKey"],
                body=body,
                now=int(time.time()),
                max_age=None,
            )
            found.append(Delivered(record["headers"]["ce-id"], body))
        return found


class TestJsonlJobEventPublisher(JobEventPublisherContract):
    @pytest.fixture
    def path(self, tmp_path: Path) -> Path:
        return tmp_path / "data" / "events.jsonl"

    @pytest.fixture
    async def publisher(self, path: Path) -> AsyncIterator[JsonlJobEventPublisher]:
        publisher = JsonlJobEventPublisher(path, source=SOURCE, signer=HmacTestSigner())
        yield publisher
        await publisher.close()

    @pytest.fixture
    def broken_publisher(self, tmp_path: Path) -> JsonlJobEventPublisher:
        blocker = tmp_path / "not-a-folder"
        blocker.write_text("")
        return JsonlJobEventPublisher(
            blocker / "events.jsonl", source=SOURCE, signer=HmacTestSigner()
        )

    @pytest.fixture
    def inspector(self, path: Path) -> JsonlInspector:
        return JsonlInspector(path)


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
