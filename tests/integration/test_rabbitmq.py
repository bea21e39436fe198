"""The RabbitMQ adapters against the real broker on 127.0.0.1:5672.

Every test uses its own uniquely named queues and exchanges (DLX and DLQ included) and deletes
them afterwards, so runs never interfere with each other or with a deployed topology.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit
from uuid import UUID, uuid4

import aio_pika
import pytest
from aio_pika.abc import AbstractChannel, AbstractConnection, AbstractIncomingMessage

from adapters.messaging.rabbitmq import AioPikaJobEventPublisher, AioPikaWorkQueue
from adapters.messaging.rabbitmq_consumer import RabbitWorkConsumer
from adapters.messaging.rabbitmq_topology import RabbitTopology
from adapters.messaging.wire.events import notification_body
from adapters.messaging.wire.work import work_order_body
from application.errors import PortError, PublishFailed
from application.ports.messaging import Settlement, WorkOrder
from domain.audit_chain import Checkpoint
from domain.job import Job
from domain.tenant import SINGLE_TENANT
from tests.integration.amqp_frames import (
    EVENT_TYPES,
    WORK_MESSAGE_TYPES,
    field_types,
    raw_header_tables,
)
from tests.support.jobs import ended_job, requested_job
from tests.support.signing import HmacTestSigner

pytestmark = pytest.mark.integration

AMQP_URL = os.environ.get("FETCHER_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
SOURCE = "//lerian.fetcher/worker"
NOW = 1_780_000_000


def _require_broker() -> None:
    parts = urlsplit(AMQP_URL)
    host, port = parts.hostname or "127.0.0.1", parts.port or 5672
    try:
        with socket.create_connection((host, port), timeout=2):
            return
    except OSError as e:
        pytest.fail(f"RabbitMQ is not reachable at {host}:{port} ({e})", pytrace=False)


@dataclass
class Broker:
    """A plain connection for assertions, and the entities to delete afterwards."""

    connection: AbstractConnection
    channel: AbstractChannel
    suffix: str = field(default_factory=lambda: uuid4().hex[:12])
    queues: list[str] = field(default_factory=list)
    exchanges: list[str] = field(default_factory=list)

    def name(self, base: str) -> str:
        return f"test.{base}.{self.suffix}"

    def topology(self, *, example_queues: bool = True) -> RabbitTopology:
        """Fresh names for everything; without ``example_queues`` no queue is bound to the
        events exchange."""
        topology = RabbitTopology(
            work_queue=self.name("work.queue"),
            events_exchange=self.name("events"),
            work_exchange=self.name("work.exchange"),
            dead_letter_exchange=self.name("dlx"),
            dead_letter_queue=self.name("dlq"),
            event_queues=(
                (self.name("example.completed"), "job.completed"),
                (self.name("example.failed"), "job.failed"),
            )
            if example_queues
            else (),
        )
        self.queues += [topology.work_queue, topology.dead_letter_queue]
        self.queues += [name for name, _ in topology.event_queues]
        self.exchanges += [
            topology.events_exchange,
            topology.work_exchange,
            topology.dead_letter_exchange,
        ]
        return topology

    async def fresh_channel(self) -> AbstractChannel:
        return await self.connection.channel()

    async def get(self, queue: str, *, within: float = 5.0) -> AbstractIncomingMessage:
        source = await self.channel.get_queue(queue)
        deadline = asyncio.get_running_loop().time() + within
        while True:
            message = await source.get(no_ack=True, fail=False)
            if message is not None:
                return message
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"nothing arrived on {queue}")
            await asyncio.sleep(0.05)

    async def depth(self, queue: str) -> int:
        declared = await self.channel.declare_queue(queue, passive=True)
        return int(declared.declaration_result.message_count or 0)


@pytest.fixture
async def broker() -> AsyncIterator[Broker]:
    _require_broker()
    connection = await aio_pika.connect(AMQP_URL)
    state = Broker(connection=connection, channel=await connection.channel())
    try:
        yield state
    finally:
        cleanup = await connection.channel()
        for queue in state.queues:
            with contextlib.suppress(Exception):
                await cleanup.queue_delete(queue)
        for exchange in state.exchanges:
            with contextlib.suppress(Exception):
                await cleanup.exchange_delete(exchange)
        await connection.close()


def _order(job_id: UUID | None = None, request_id: str = "req-1") -> Job:
    return requested_job(job_id, request_id=request_id)


def _notification(status: str = "completed") -> Job:
    ended = datetime(2026, 7, 13, 13, 0, 0, 250000, tzinfo=UTC)
    return ended_job(status, request_id="req-9", finished_at=ended)


Handler = Callable[[WorkOrder], Awaitable[Settlement]]


@contextlib.asynccontextmanager
async def _consuming(queue: str, handler: Handler, **options: Any) -> AsyncIterator[None]:
    consumer = await RabbitWorkConsumer.connect(
        AMQP_URL, queue, HmacTestSigner(), handler, clock=lambda: NOW, **options
    )
    runner = asyncio.create_task(consumer.run())
    try:
        yield
    finally:
        await consumer.stop()
        await asyncio.wait_for(runner, timeout=10)


def test_topology_defaults_are_the_reference_names() -> None:
    topology = RabbitTopology()
    assert topology.work_queue == "fetcher.extract-external-data.queue"
    assert topology.events_exchange == "fetcher.job.events"
    assert topology.work_exchange == "fetcher.extract-external-data.exchange"
    assert topology.work_routing_key == "fetcher.job.key"
    assert topology.dead_letter_exchange == "fetcher.dlx"
    assert topology.dead_letter_queue == "fetcher.dlq"
    assert topology.work_queue_arguments() == {
        "x-dead-letter-exchange": "fetcher.dlx",
        "x-dead-letter-routing-key": "fetcher.dlq.key",
    }
    assert topology.dead_letter_queue_arguments() == {
        "x-message-ttl": 604_800_000,
        "x-max-length": 10_000,
    }


async def test_topology_declares_twice_with_the_exact_arguments(broker: Broker) -> None:
    topology = broker.topology()

    await topology.apply(AMQP_URL)
    await topology.apply(AMQP_URL)
    await topology.apply(AMQP_URL, passive=True)

    # Re-declaring with the literal reference arguments is accepted by the broker only if
    # they are equivalent to what exists; anything else is a precondition failure.
    channel = await broker.fresh_channel()
    await channel.declare_queue(
        topology.work_queue,
        durable=True,
        arguments={
            "x-dead-letter-exchange": topology.dead_letter_exchange,
            "x-dead-letter-routing-key": "fetcher.dlq.key",
        },
    )
    await channel.declare_queue(
        topology.dead_letter_queue,
        durable=True,
        arguments={"x-message-ttl": 604800000, "x-max-length": 10000},
    )
    await channel.declare_exchange(
        topology.events_exchange, aio_pika.ExchangeType.TOPIC, durable=True
    )
    await channel.declare_exchange(
        topology.dead_letter_exchange, aio_pika.ExchangeType.DIRECT, durable=True
    )
    with pytest.raises(aio_pika.exceptions.ChannelPreconditionFailed):
        await channel.declare_queue(topology.work_queue, durable=True)


async def test_topology_reports_a_conflicting_work_queue(broker: Broker) -> None:
    topology = broker.topology()
    await topology.apply(AMQP_URL)
    conflicting = RabbitTopology(
        work_queue=topology.work_queue,
        events_exchange=topology.events_exchange,
        work_exchange=topology.work_exchange,
        dead_letter_exchange=topology.dead_letter_exchange,
        dead_letter_queue=topology.dead_letter_queue,
        dead_letter_routing_key="another.key",
    )

    with pytest.raises(PortError, match="different settings"):
        await conflicting.apply(AMQP_URL)


async def test_topology_bindings_route_to_the_work_queue_and_the_dlq(broker: Broker) -> None:
    topology = broker.topology()
    await topology.apply(AMQP_URL)

    work_exchange = await broker.channel.get_exchange(topology.work_exchange)
    await work_exchange.publish(aio_pika.Message(b"w"), routing_key="fetcher.job.key")
    dlx = await broker.channel.get_exchange(topology.dead_letter_exchange)
    await dlx.publish(aio_pika.Message(b"d"), routing_key="fetcher.dlq.key")

    assert (await broker.get(topology.work_queue)).body == b"w"
    assert (await broker.get(topology.dead_letter_queue)).body == b"d"


async def test_passive_topology_check_fails_when_entities_are_missing(broker: Broker) -> None:
    with pytest.raises(PortError, match="does not exist"):
        await broker.topology().apply(AMQP_URL, passive=True)


async def test_published_work_order_arrives_persistent_with_verifying_headers(
    broker: Broker,
) -> None:
    topology = broker.topology()
    await topology.apply(AMQP_URL)
    signer = HmacTestSigner()
    queue = await AioPikaWorkQueue.connect(AMQP_URL, topology.work_queue, signer, lambda: NOW)
    order = _order(request_id="req-42")
    try:
        await queue.check()
        await queue.publish(order)
    finally:
        await queue.close()

    message = await broker.get(topology.work_queue)
    assert message.body == work_order_body(order)
    assert message.delivery_mode == aio_pika.DeliveryMode.PERSISTENT
    assert message.content_type == "application/json"
    assert message.exchange == ""
    assert message.routing_key == topology.work_queue
    headers = message.headers
    assert {k: v for k, v in headers.items() if k not in {"x-message-signature"}} == {
        "jobId": str(order.id),
        "X-Request-Id": "req-42",
        "x-retry-count": 0,
        "t": str(NOW),
        "signature-version": "v1",
    }
    signer.verify(
        headers=headers,
        exchange=message.exchange,
        routing_key=message.routing_key,
        body=message.body,
        now=NOW,
        max_age=None,
    )


async def test_work_order_to_a_missing_queue_raises_publish_failed(broker: Broker) -> None:
    queue = await AioPikaWorkQueue.connect(AMQP_URL, broker.name("absent"), HmacTestSigner())
    try:
        with pytest.raises(PublishFailed, match="not routed"):
            await queue.publish(_order())
        with pytest.raises(PublishFailed):
            await queue.check()
    finally:
        await queue.close()


async def test_consumer_dead_letters_a_message_with_an_invalid_signature(broker: Broker) -> None:
    topology = broker.topology()
    await topology.apply(AMQP_URL)
    forger = await AioPikaWorkQueue.connect(
        AMQP_URL, topology.work_queue, HmacTestSigner(key=b"not the internal key"), lambda: NOW
    )
    order = _order()
    try:
        await forger.publish(order)
    finally:
        await forger.close()
    calls: list[WorkOrder] = []

    async def handler(work: WorkOrder) -> Settlement:
        calls.append(work)
        return Settlement.ACK

    async with _consuming(topology.work_queue, handler):
        dead = await broker.get(topology.dead_letter_queue)

    assert dead.body == work_order_body(order)
    assert calls == []
    death = (dead.headers.get("x-death") or [{}])[0]
    assert death.get("reason") == "rejected"
    assert death.get("queue") == topology.work_queue


async def test_consumer_dead_letters_a_signed_body_without_a_job_id(broker: Broker) -> None:
    topology = broker.topology()
    await topology.apply(AMQP_URL)
    body = b'{"metadata":{}}'
    headers = HmacTestSigner().sign(
        tenant="", exchange="", routing_key=topology.work_queue, body=body, timestamp=NOW
    )
    await broker.channel.default_exchange.publish(
        aio_pika.Message(body, headers=dict(headers)), routing_key=topology.work_queue
    )

    async def handler(work: WorkOrder) -> Settlement:
        raise AssertionError("must not be called")

    async with _consuming(topology.work_queue, handler):
        dead = await broker.get(topology.dead_letter_queue)

    assert dead.body == body


async def _publish_order(queue_name: str, order: Job) -> None:
    queue = await AioPikaWorkQueue.connect(AMQP_URL, queue_name, HmacTestSigner(), lambda: NOW)
    try:
        await queue.publish(order)
    finally:
        await queue.close()


async def test_handler_retry_requeues_the_order(broker: Broker) -> None:
    topology = broker.topology()
    await topology.apply(AMQP_URL)
    order = _order()
    await _publish_order(topology.work_queue, order)
    calls: list[WorkOrder] = []
    done = asyncio.Event()

    async def handler(work: WorkOrder) -> Settlement:
        calls.append(work)
        if len(calls) == 1:
            return Settlement.REQUEUE
        done.set()
        return Settlement.ACK

    async with _consuming(topology.work_queue, handler, retry_delay=0.05):
        await asyncio.wait_for(done.wait(), timeout=10)

    assert [c.job_id for c in calls] == [order.id, order.id]
    assert calls[0] == calls[1] == WorkOrder(order.id, "req-1", tenant=SINGLE_TENANT)
    assert await broker.depth(topology.work_queue) == 0
    assert await broker.depth(topology.dead_letter_queue) == 0


async def test_handler_error_requeues_then_dead_letter_outcome_rejects(broker: Broker) -> None:
    topology = broker.topology()
    await topology.apply(AMQP_URL)
    await _publish_order(topology.work_queue, _order())
    calls = 0

    async def handler(work: WorkOrder) -> Settlement:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("transient")
        return Settlement.DEAD_LETTER

    async with _consuming(topology.work_queue, handler, error_backoff=0.05, max_backoff=0.05):
        await broker.get(topology.dead_letter_queue)

    assert calls == 2


async def test_stop_lets_the_in_flight_handler_finish_and_ack(broker: Broker) -> None:
    topology = broker.topology()
    await topology.apply(AMQP_URL)
    await _publish_order(topology.work_queue, _order())
    started, finished = asyncio.Event(), asyncio.Event()

    async def handler(work: WorkOrder) -> Settlement:
        started.set()
        await asyncio.sleep(0.3)
        finished.set()
        return Settlement.ACK

    async with _consuming(topology.work_queue, handler):
        await asyncio.wait_for(started.wait(), timeout=10)

    assert finished.is_set()
    assert await broker.depth(topology.work_queue) == 0


async def test_event_arrives_on_a_bound_queue_with_all_headers(broker: Broker) -> None:
    topology = broker.topology()
    await topology.apply(AMQP_URL)
    bound = broker.name("completed")
    broker.queues.append(bound)
    queue = await broker.channel.declare_queue(bound, auto_delete=True)
    await queue.bind(topology.events_exchange, routing_key="job.completed")
    signer = HmacTestSigner()
    publisher = await AioPikaJobEventPublisher.connect(
        AMQP_URL, topology.events_exchange, SOURCE, signer, lambda: NOW
    )
    event = _notification("completed")
    try:
        await publisher.check()
        await publisher.publish(event)
    finally:
        await publisher.close()

    message = await broker.get(bound)
    assert message.body == notification_body(event)
    assert message.delivery_mode == aio_pika.DeliveryMode.PERSISTENT
    assert message.content_type == "application/json"
    assert message.exchange == topology.events_exchange
    assert message.routing_key == "job.completed"
    headers = dict(message.headers)
    signature = headers.pop("x-message-signature")
    assert headers == {
        "ce-specversion": bytearray(b"1.0"),
        "ce-id": bytearray(f"fetcher.job.completed.{event.id}".encode()),
        "ce-source": bytearray(SOURCE.encode()),
        "ce-type": bytearray(b"studio.lerian.job.completed"),
        "ce-time": bytearray(b"2026-07-13T13:00:00.25Z"),
        "ce-subject": bytearray(str(event.id).encode()),
        "ce-datacontenttype": bytearray(b"application/json"),
        "ce-schemaversion": bytearray(b"1.0.0"),
        "ce-resourcetype": bytearray(b"job"),
        "ce-eventtype": bytearray(b"completed"),
        "ce-tenantid": bytearray(b"single-tenant"),
        "X-Tenant-ID": "single-tenant",
        "X-Request-Id": "req-9",
        "x-retry-count": 0,
        "t": str(NOW),
        "signature-version": "v1",
    }
    assert isinstance(signature, str) and len(signature) == 64
    signer.verify(
        headers=message.headers,
        exchange=topology.events_exchange,
        routing_key="job.completed",
        body=message.body,
        now=NOW,
        max_age=300,
    )


async def test_work_message_headers_go_over_the_wire_with_the_reference_field_types(
    broker: Broker,
) -> None:
    """Reference §4.8: ``jobId`` and ``X-Request-Id`` strings, ``x-retry-count`` a long-int
    (Go ``int``), the signature trio strings, no ``X-Tenant-ID`` in single-tenant mode."""
    topology = broker.topology()
    await topology.apply(AMQP_URL)
    queue = await AioPikaWorkQueue.connect(
        AMQP_URL, topology.work_queue, HmacTestSigner(), lambda: NOW
    )
    request_id = f"req-{uuid4()}"
    try:
        await queue.publish(_order(request_id=request_id))
    finally:
        await queue.close()

    with raw_header_tables() as seen:
        await broker.get(topology.work_queue)

    assert field_types(seen, "X-Request-Id", request_id) == WORK_MESSAGE_TYPES


@pytest.mark.parametrize("status", ["completed", "failed"])
async def test_event_headers_go_over_the_wire_with_the_reference_field_types(
    broker: Broker, status: str
) -> None:
    """Reference §5.2: every ``ce-*`` value a byte array (field type ``x``), the envelope's
    ``X-Tenant-ID``, ``X-Request-Id`` and signature trio strings (``t`` a decimal string),
    ``x-retry-count`` a long-int."""
    topology = broker.topology()
    await topology.apply(AMQP_URL)
    bound = broker.name(status)
    broker.queues.append(bound)
    queue = await broker.channel.declare_queue(bound, auto_delete=True)
    await queue.bind(topology.events_exchange, routing_key=f"job.{status}")
    publisher = await AioPikaJobEventPublisher.connect(
        AMQP_URL, topology.events_exchange, SOURCE, HmacTestSigner(), lambda: NOW
    )
    event = _notification(status)
    try:
        await publisher.publish(event)
    finally:
        await publisher.close()

    with raw_header_tables() as seen:
        message = await broker.get(bound)

    assert field_types(seen, "ce-id", f"fetcher.job.{status}.{event.id}") == EVENT_TYPES
    HmacTestSigner().verify(
        headers=message.headers,
        exchange=topology.events_exchange,
        routing_key=f"job.{status}",
        body=message.body,
        now=NOW,
        max_age=300,
    )


async def test_event_without_a_bound_queue_raises_publish_failed(broker: Broker) -> None:
    topology = broker.topology(example_queues=False)
    await topology.apply(AMQP_URL)
    bound = broker.name("completed-only")
    broker.queues.append(bound)
    queue = await broker.channel.declare_queue(bound, auto_delete=True)
    await queue.bind(topology.events_exchange, routing_key="job.completed")
    publisher = await AioPikaJobEventPublisher.connect(
        AMQP_URL, topology.events_exchange, SOURCE, HmacTestSigner()
    )
    try:
        with pytest.raises(PublishFailed, match="not routed"):
            await publisher.publish(_notification("failed"))
        await publisher.publish(_notification("completed"))
    finally:
        await publisher.close()

    assert (await broker.get(bound)).routing_key == "job.completed"


async def test_event_to_a_missing_exchange_fails_then_recovers(broker: Broker) -> None:
    exchange = broker.name("late.events")
    publisher = await AioPikaJobEventPublisher.connect(AMQP_URL, exchange, SOURCE, HmacTestSigner())
    try:
        with pytest.raises(PublishFailed):
            await publisher.publish(_notification())
        with pytest.raises(PublishFailed):
            await publisher.check()

        broker.exchanges.append(exchange)
        bound = broker.name("late.completed")
        broker.queues.append(bound)
        target = await broker.channel.declare_exchange(exchange, aio_pika.ExchangeType.TOPIC)
        queue = await broker.channel.declare_queue(bound, auto_delete=True)
        await queue.bind(target, routing_key="job.completed")

        await publisher.check()
        await publisher.publish(_notification())
    finally:
        await publisher.close()

    assert (await broker.get(bound)).routing_key == "job.completed"


async def test_cancelling_run_still_finishes_the_in_flight_handler(broker: Broker) -> None:
    topology = broker.topology()
    await topology.apply(AMQP_URL)
    await _publish_order(topology.work_queue, _order())
    started, finished = asyncio.Event(), asyncio.Event()

    async def handler(work: WorkOrder) -> Settlement:
        started.set()
        await asyncio.sleep(0.2)
        finished.set()
        return Settlement.ACK

    consumer = await RabbitWorkConsumer.connect(
        AMQP_URL, topology.work_queue, HmacTestSigner(), handler, clock=lambda: NOW
    )
    runner = asyncio.create_task(consumer.run())
    await asyncio.wait_for(started.wait(), timeout=10)
    runner.cancel()
    with pytest.raises(asyncio.CancelledError):
        await runner
    await consumer.stop()

    assert finished.is_set()
    assert await broker.depth(topology.work_queue) == 0


async def test_an_audit_checkpoint_is_a_signed_cloudevent_on_the_events_exchange(
    broker: Broker,
) -> None:
    topology = broker.topology()
    await topology.apply(AMQP_URL)
    bound = broker.name("checkpoints")
    broker.queues.append(bound)
    queue = await broker.channel.declare_queue(bound, auto_delete=True)
    await queue.bind(topology.events_exchange, routing_key="audit.checkpoint")
    signer = HmacTestSigner()
    publisher = await AioPikaJobEventPublisher.connect(
        AMQP_URL, topology.events_exchange, SOURCE, signer, lambda: NOW
    )
    checkpoint = Checkpoint(
        position=42, count=42, root="ab" * 32, recorded_at="2026-12-05T10:00:00.5Z",
        key_id="1.abc", heads={"0190f0f0-0000-7000-8000-00000000000a": (3, "cd" * 32)},
        signature="c2lnbmF0dXJl",
    )  # fmt: skip
    try:
        await publisher.publish_checkpoint(checkpoint)
    finally:
        await publisher.close()

    message = await broker.get(bound)
    assert message.routing_key == "audit.checkpoint"
    assert message.delivery_mode == aio_pika.DeliveryMode.PERSISTENT
    body = json.loads(message.body)
    assert body == {**checkpoint.to_json(with_heads=False)}
    assert "0190f0f0" not in message.body.decode()  # the heads' job ids stay inside
    headers = dict(message.headers)
    assert headers["ce-id"] == bytearray(b"fetcher.audit.checkpoint.42")
    assert headers["ce-type"] == bytearray(b"studio.lerian.audit.checkpoint")
    assert headers["ce-subject"] == bytearray(b"42")
    assert headers["ce-time"] == bytearray(b"2026-12-05T10:00:00.5Z")
    assert "X-Tenant-ID" not in headers and "ce-tenantid" not in headers
    signer.verify(
        headers=headers,
        exchange=topology.events_exchange,
        routing_key="audit.checkpoint",
        body=message.body,
        now=NOW,
        max_age=None,
    )
