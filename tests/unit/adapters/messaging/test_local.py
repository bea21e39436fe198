"""The embedded messaging of `fetcher serve`: the in-process work queue and its consumer, the
events file; the work queue and job-event publisher contracts on them (RabbitMQ runs the same
contracts in ``tests/integration``)."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from uuid import UUID

import pytest

from adapters.messaging.local import (
    InProcessWorkConsumer,
    InProcessWorkQueue,
    JsonlJobEventPublisher,
)
from adapters.messaging.wire.envelope import header_text
from adapters.messaging.wire.events import notification_body
from application.errors import PublishFailed
from application.ports.messaging import (
    Settlement,
    WorkConsumer,
    WorkHandler,
    WorkOrder,
)
from domain.job import Job
from tests.contracts.event_publisher import Delivered, JobEventPublisherContract
from tests.contracts.work_queue import ConsumerFactory, WorkQueueContract
from tests.support.jobs import ended_job, requested_job
from tests.support.signing import KEY, HmacTestSigner

NOW = 1_780_000_000
SOURCE = "//lerian.fetcher/worker"
FAST = {"retry_delay": 0.02, "error_backoff": 0.02, "max_backoff": 0.02}


def _order() -> Job:
    return requested_job(request_id="")


def _notification(status: str = "completed") -> Job:
    return ended_job(status, metadata={"source": "payments", "note": "café <&>"})


async def _run_until(consumer: InProcessWorkConsumer, done: asyncio.Event) -> None:
    runner = asyncio.create_task(consumer.run())
    await asyncio.wait_for(done.wait(), timeout=5)
    await consumer.stop()
    await asyncio.wait_for(runner, timeout=5)


async def test_in_process_queue_delivers_signed_orders_to_the_handler() -> None:
    signer = HmacTestSigner()
    queue = InProcessWorkQueue(signer, queue_name="work.q", clock=lambda: NOW)
    orders = [_order(), _order()]
    for order in orders:
        await queue.publish(order)
    seen: list[WorkOrder] = []
    done = asyncio.Event()

    async def handler(order: WorkOrder) -> Settlement:
        seen.append(order)
        if len(seen) == len(orders):
            done.set()
        return Settlement.ACK

    await _run_until(InProcessWorkConsumer(queue, signer, handler, clock=lambda: NOW), done)

    assert sorted(o.job_id for o in seen) == sorted(job.id for job in orders)
    assert all(o.request_id for o in seen)
    assert queue.messages.empty()
    assert queue.dead_letters == []


async def test_in_process_consumer_dead_letters_an_invalid_signature() -> None:
    queue = InProcessWorkQueue(HmacTestSigner(key=b"other key"), queue_name="work.q")
    await queue.publish(_order())
    called = False

    async def handler(order: WorkOrder) -> Settlement:
        nonlocal called
        called = True
        return Settlement.ACK

    consumer = InProcessWorkConsumer(queue, HmacTestSigner(), handler)
    runner = asyncio.create_task(consumer.run())
    for _ in range(100):
        if queue.dead_letters:
            break
        await asyncio.sleep(0.01)
    await consumer.stop()
    await runner

    assert len(queue.dead_letters) == 1
    assert not called


async def test_in_process_consumer_retries_and_survives_handler_errors() -> None:
    signer = HmacTestSigner()
    queue = InProcessWorkQueue(signer)
    await queue.publish(_order())
    calls = 0
    done = asyncio.Event()

    async def handler(order: WorkOrder) -> Settlement:
        nonlocal calls
        calls += 1
        if calls == 1:
            return Settlement.REQUEUE
        if calls == 2:
            raise RuntimeError("transient")
        done.set()
        return Settlement.ACK

    consumer = InProcessWorkConsumer(
        queue, signer, handler, retry_delay=0.01, error_backoff=0.01, max_backoff=0.01
    )
    await _run_until(consumer, done)

    assert calls == 3
    assert queue.messages.empty()


async def test_in_process_stop_lets_in_flight_handlers_finish() -> None:
    signer = HmacTestSigner()
    queue = InProcessWorkQueue(signer)
    await queue.publish(_order())
    started, finished = asyncio.Event(), asyncio.Event()

    async def handler(order: WorkOrder) -> Settlement:
        started.set()
        await asyncio.sleep(0.1)
        finished.set()
        return Settlement.ACK

    consumer = InProcessWorkConsumer(queue, signer, handler)
    runner = asyncio.create_task(consumer.run())
    await asyncio.wait_for(started.wait(), timeout=5)
    await consumer.stop()
    await runner

    assert finished.is_set()
    assert queue.messages.empty()


async def test_in_process_stop_timeout_returns_unfinished_work_to_the_queue() -> None:
    signer = HmacTestSigner()
    queue = InProcessWorkQueue(signer)
    await queue.publish(_order())
    started = asyncio.Event()

    async def handler(order: WorkOrder) -> Settlement:
        started.set()
        await asyncio.sleep(60)
        return Settlement.ACK

    consumer = InProcessWorkConsumer(queue, signer, handler, stop_timeout=0.05)
    runner = asyncio.create_task(consumer.run())
    await asyncio.wait_for(started.wait(), timeout=5)
    await consumer.stop()
    await runner

    assert queue.messages.qsize() == 1


async def test_closed_in_process_queue_refuses_publishes() -> None:
    queue = InProcessWorkQueue(HmacTestSigner())
    await queue.close()
    with pytest.raises(PublishFailed):
        await queue.publish(_order())
    with pytest.raises(PublishFailed):
        await queue.check()


async def test_jsonl_publisher_appends_one_signed_line_per_event(tmp_path: Path) -> None:
    path = tmp_path / "data" / "events.jsonl"
    publisher = JsonlJobEventPublisher(
        path, source="//lerian.fetcher/worker", signer=HmacTestSigner(), clock=lambda: NOW
    )
    events = [_notification("completed"), _notification("failed")]

    await publisher.check()
    await asyncio.gather(*(publisher.publish(e) for e in events))

    lines = path.read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["routingKey"] for r in records] == ["job.completed", "job.failed"]
    for record, event in zip(records, events, strict=True):
        assert set(record) == {"exchange", "routingKey", "headers", "body"}
        assert record["exchange"] == "fetcher.job.events"
        body = notification_body(event)
        assert record["body"].encode("utf-8") == body
        headers = record["headers"]
        assert headers["ce-id"] == f"fetcher.job.{event.status}.{event.id}"
        assert headers["X-Tenant-ID"] == "single-tenant"
        assert headers["x-retry-count"] == 0
        payload = (
            f"{NOW}\nv1\nsingle-tenant\n{event.id}\nfetcher.job.events\n{record['routingKey']}\n"
        ).encode() + body
        assert headers["x-message-signature"] == hmac.new(KEY, payload, hashlib.sha256).hexdigest()


async def test_jsonl_publisher_reports_an_unwritable_file(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    publisher = JsonlJobEventPublisher(
        blocker / "events.jsonl", source="//s", signer=HmacTestSigner()
    )
    with pytest.raises(PublishFailed):
        await publisher.publish(_notification())


async def test_cancelling_run_drains_in_flight_work_and_loses_no_message() -> None:
    signer = HmacTestSigner()
    queue = InProcessWorkQueue(signer)
    await queue.publish(_order())
    started, finished = asyncio.Event(), asyncio.Event()

    async def handler(order: WorkOrder) -> Settlement:
        started.set()
        await asyncio.sleep(0.05)
        finished.set()
        return Settlement.ACK

    consumer = InProcessWorkConsumer(queue, signer, handler)
    runner = asyncio.create_task(consumer.run())
    await asyncio.wait_for(started.wait(), timeout=5)
    runner.cancel()
    with pytest.raises(asyncio.CancelledError):
        await runner
    await consumer.stop()

    assert finished.is_set()
    await queue.publish(_order())
    assert queue.messages.qsize() == 1


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
