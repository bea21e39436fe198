"""The work queue and job-event publisher contracts on RabbitMQ (the twins run them in
``tests/unit``). Every test uses its own uniquely named entities, deleted afterwards."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from uuid import UUID

import pytest

from adapters.messaging.rabbitmq import AioPikaJobEventPublisher, AioPikaWorkQueue
from adapters.messaging.rabbitmq_consumer import RabbitWorkConsumer
from adapters.messaging.rabbitmq_topology import RabbitTopology
from adapters.messaging.wire.envelope import header_text
from application.ports.messaging import WorkConsumer, WorkHandler
from tests.contracts.event_publisher import Delivered, JobEventPublisherContract
from tests.contracts.work_queue import ConsumerFactory, WorkQueueContract
from tests.integration.test_rabbitmq import AMQP_URL, SOURCE, Broker, broker  # noqa: F401
from tests.support.signing import HmacTestSigner

pytestmark = pytest.mark.integration

FAST = {"retry_delay": 0.02, "error_backoff": 0.02, "max_backoff": 0.02}
TIMEOUT = 1.0  # a publish on a closed connection fails after this


@pytest.fixture
async def topology(broker: Broker) -> RabbitTopology:  # noqa: F811
    topology = broker.topology()
    await topology.apply(AMQP_URL)
    return topology


class RabbitWorkInspector:
    def __init__(self, broker: Broker, topology: RabbitTopology) -> None:  # noqa: F811
        self._broker = broker
        self._topology = topology
        self._dead: list[UUID] = []

    async def waiting(self) -> int:
        return await self._broker.depth(self._topology.work_queue)

    async def dead_lettered(self) -> list[UUID]:
        source = await self._broker.channel.get_queue(self._topology.dead_letter_queue)
        while (message := await source.get(no_ack=True, fail=False)) is not None:
            self._dead.append(UUID(header_text(message.headers["jobId"])))
        return list(self._dead)


class TestRabbitWorkQueue(WorkQueueContract):
    @pytest.fixture
    async def queue(self, topology: RabbitTopology) -> AsyncIterator[AioPikaWorkQueue]:
        queue = await AioPikaWorkQueue.connect(
            AMQP_URL, topology.work_queue, HmacTestSigner(), operation_timeout=TIMEOUT
        )
        yield queue
        await queue.close()

    @pytest.fixture
    async def broken_queue(self, broker: Broker) -> AsyncIterator[AioPikaWorkQueue]:  # noqa: F811
        queue = await AioPikaWorkQueue.connect(
            AMQP_URL, broker.name("absent"), HmacTestSigner(), operation_timeout=TIMEOUT
        )
        yield queue
        await queue.close()

    @pytest.fixture
    def consumer_for(self, topology: RabbitTopology) -> ConsumerFactory:
        async def make(handler: WorkHandler) -> WorkConsumer:
            return await RabbitWorkConsumer.connect(
                AMQP_URL, topology.work_queue, HmacTestSigner(), handler, **FAST
            )

        return make

    @pytest.fixture
    def inspector(self, broker: Broker, topology: RabbitTopology) -> RabbitWorkInspector:  # noqa: F811
        return RabbitWorkInspector(broker, topology)


class RabbitEventInspector:
    """Reads a queue bound to every job event and checks each message's signature."""

    def __init__(self, broker: Broker, queue: str) -> None:  # noqa: F811
        self._broker = broker
        self._queue = queue
        self._signer = HmacTestSigner()
        self._seen: list[Delivered] = []

    async def delivered(self) -> list[Delivered]:
        source = await self._broker.channel.get_queue(self._queue)
        while (message := await source.get(no_ack=True, fail=False)) is not None:
            self._signer.verify(
                headers=message.headers,
                exchange=message.exchange or "",
                routing_key=message.routing_key or "",
                body=message.body,
                now=int(time.time()),
                max_age=None,
            )
            self._seen.append(Delivered(header_text(message.headers["ce-id"]), message.body))
        return list(self._seen)


class TestAioPikaJobEventPublisher(JobEventPublisherContract):
    @pytest.fixture
    async def events_queue(self, broker: Broker, topology: RabbitTopology) -> str:  # noqa: F811
        name = broker.name("all.events")
        broker.queues.append(name)
        queue = await broker.channel.declare_queue(name, auto_delete=True)
        await queue.bind(topology.events_exchange, routing_key="job.*")
        return name

    @pytest.fixture
    async def publisher(
        self, topology: RabbitTopology, events_queue: str
    ) -> AsyncIterator[AioPikaJobEventPublisher]:
        publisher = await AioPikaJobEventPublisher.connect(
            AMQP_URL,
            topology.events_exchange,
            SOURCE,
            HmacTestSigner(),
            operation_timeout=TIMEOUT,
        )
        yield publisher
        await publisher.close()

    @pytest.fixture
    async def broken_publisher(
        self,
        broker: Broker,  # noqa: F811
    ) -> AsyncIterator[AioPikaJobEventPublisher]:
        publisher = await AioPikaJobEventPublisher.connect(
            AMQP_URL,
            broker.name("missing.events"),
            SOURCE,
            HmacTestSigner(),
            operation_timeout=TIMEOUT,
        )
        yield publisher
        await publisher.close()

    @pytest.fixture
    def inspector(self, broker: Broker, events_queue: str) -> RabbitEventInspector:  # noqa: F811
        return RabbitEventInspector(broker, events_queue)
