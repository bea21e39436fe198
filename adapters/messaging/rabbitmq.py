"""RabbitMQ adapters on aio-pika: topology, work queue and job-event publisher.

Every publish goes out persistent, ``mandatory`` and with publisher confirms on a channel
opened with ``on_return_raises``, so it only returns once the broker has routed and stored it.
This deliberately differs from the reference for events (§5.1): the reference ignores returns,
so an event whose routing key has no bound queue is confirmed and lost; here it raises
``PublishFailed`` and the caller retries later. A robust connection restores channels and
consumers but never re-sends a failed publish; that is the caller's retry.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aio_pika
from aio_pika.abc import (
    AbstractChannel,
    AbstractExchange,
    AbstractRobustChannel,
    AbstractRobustConnection,
)
from aio_pika.exceptions import (
    CONNECTION_EXCEPTIONS,
    ChannelNotFoundEntity,
    ChannelPreconditionFailed,
    DeliveryError,
    PublishError,
)

from adapters.messaging.amqp_fields import amqp_headers
from adapters.messaging.cloudevents_mapping import job_event_message
from adapters.messaging.envelope import (
    EVENTS_EXCHANGE,
    WORK_QUEUE,
    OutgoingMessage,
    work_message,
)
from application.errors import PortError, PublishFailed
from application.ports.messaging import JobEventPublisher, JobNotification, WorkOrder, WorkQueue
from application.ports.signer import MessageSigner

logger = logging.getLogger(__name__)

CONTENT_TYPE = "application/json"


def unix_now() -> int:
    return int(time.time())


@dataclass(frozen=True, slots=True)
class RabbitTopology:
    """The reference broker topology (§6.4). Names default to the shipped definitions; the
    work queue's dead-letter arguments must stay identical to them, or declaring it conflicts
    with existing deployments."""

    work_queue: str = WORK_QUEUE
    events_exchange: str = EVENTS_EXCHANGE
    work_exchange: str = "fetcher.extract-external-data.exchange"
    work_routing_key: str = "fetcher.job.key"
    dead_letter_exchange: str = "fetcher.dlx"
    dead_letter_queue: str = "fetcher.dlq"
    dead_letter_routing_key: str = "fetcher.dlq.key"
    dead_letter_ttl_ms: int = 604_800_000
    dead_letter_max_length: int = 10_000

    def work_queue_arguments(self) -> dict[str, Any]:
        return {
            "x-dead-letter-exchange": self.dead_letter_exchange,
            "x-dead-letter-routing-key": self.dead_letter_routing_key,
        }

    def dead_letter_queue_arguments(self) -> dict[str, Any]:
        return {
            "x-message-ttl": self.dead_letter_ttl_ms,
            "x-max-length": self.dead_letter_max_length,
        }

    async def declare(self, channel: AbstractChannel, *, passive: bool = False) -> None:
        """Declare everything (idempotent: same names, same arguments). With ``passive``
        only check that each exchange and queue exists, changing nothing (for brokers
        provisioned from definitions where this user may not configure). An entity that
        exists with other settings, or is missing in passive mode, raises ``PortError``; the
        channel is closed by the broker then, so use a dedicated one."""
        name = ""
        try:
            name = self.dead_letter_exchange
            dlx = await channel.declare_exchange(
                name, aio_pika.ExchangeType.DIRECT, durable=True, passive=passive
            )
            name = self.dead_letter_queue
            dlq = await channel.declare_queue(
                name, durable=True, arguments=self.dead_letter_queue_arguments(), passive=passive
            )
            name = self.work_queue
            work = await channel.declare_queue(
                name, durable=True, arguments=self.work_queue_arguments(), passive=passive
            )
            name = self.work_exchange
            work_exchange = await channel.declare_exchange(
                name, aio_pika.ExchangeType.DIRECT, durable=True, passive=passive
            )
            name = self.events_exchange
            await channel.declare_exchange(
                name, aio_pika.ExchangeType.TOPIC, durable=True, passive=passive
            )
            if not passive:
                name = self.dead_letter_queue
                await dlq.bind(dlx, routing_key=self.dead_letter_routing_key)
                name = self.work_queue
                await work.bind(work_exchange, routing_key=self.work_routing_key)
        except ChannelPreconditionFailed as e:
            raise PortError(f"broker entity '{name}' exists with different settings") from e
        except ChannelNotFoundEntity as e:
            raise PortError(f"broker entity '{name}' does not exist") from e
        except CONNECTION_EXCEPTIONS as e:
            raise PortError(f"could not declare broker entity '{name}'") from e

    async def apply(
        self, url: str, *, passive: bool = False, operation_timeout: float = 10.0
    ) -> None:
        """Declare the topology over a short-lived connection of its own."""
        try:
            connection = await aio_pika.connect(url, timeout=operation_timeout)
        except CONNECTION_EXCEPTIONS as e:
            raise PortError("cannot connect to the message broker") from e
        try:
            channel = await connection.channel()
            await self.declare(channel, passive=passive)
        finally:
            with contextlib.suppress(*CONNECTION_EXCEPTIONS):
                await connection.close()


class BrokerLink:
    """The process's links to the broker, logged once per change for all its connections: a
    warning when the first one is lost, a line when the last one is back. The client's own
    reconnection lines and tracebacks are left at DEBUG (``entrypoints.logs``)."""

    def __init__(self) -> None:
        self._down: set[int] = set()
        self._closing: set[int] = set()

    def watch(self, connection: AbstractRobustConnection) -> None:
        key = id(connection)

        def closed(_: object, error: BaseException | None = None) -> None:
            if key in self._closing or error is None or isinstance(error, asyncio.CancelledError):
                return
            if not self._down:
                logger.warning("message broker connection lost (%s), reconnecting", _short(error))
            self._down.add(key)

        def reconnected(_: object) -> None:
            if key in self._down:
                self._down.discard(key)
                if not self._down:
                    logger.info("message broker connection restored")

        connection.close_callbacks.add(closed)
        connection.reconnect_callbacks.add(reconnected)

    def closing(self, connection: AbstractRobustConnection) -> None:
        """The process closes ``connection`` itself: not a lost link."""
        key = id(connection)
        self._closing.add(key)
        if key in self._down:
            self._down.discard(key)


BROKER_LINK = BrokerLink()


def _short(error: BaseException) -> str:
    text = " ".join(str(error).split())[:200]
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


async def open_channel(
    url: str, *, operation_timeout: float, error: type[PortError] = PortError
) -> tuple[AbstractRobustConnection, AbstractRobustChannel]:
    try:
        connection = await aio_pika.connect_robust(url, timeout=operation_timeout)
    except CONNECTION_EXCEPTIONS as e:
        raise error("cannot connect to the message broker") from e
    BROKER_LINK.watch(connection)
    try:
        channel = await connection.channel(publisher_confirms=True, on_return_raises=True)
    except CONNECTION_EXCEPTIONS as e:
        BROKER_LINK.closing(connection)
        await connection.close()
        raise error("cannot open a channel on the message broker") from e
    return connection, channel


class _ConfirmedPublisher:
    """One robust connection and a confirming channel shared by the two publishers."""

    def __init__(
        self,
        connection: AbstractRobustConnection,
        channel: AbstractRobustChannel,
        *,
        timeout: float,
    ) -> None:
        self._connection = connection
        self._channel = channel
        self._timeout = timeout

    @classmethod
    async def open(cls, url: str, timeout: float) -> _ConfirmedPublisher:
        connection, channel = await open_channel(
            url, operation_timeout=timeout, error=PublishFailed
        )
        return cls(connection, channel, timeout=timeout)

    @property
    def channel(self) -> AbstractRobustChannel:
        return self._channel

    async def send(self, exchange: AbstractExchange, message: OutgoingMessage) -> None:
        amqp = aio_pika.Message(
            body=message.body,
            headers=amqp_headers(message.headers),
            content_type=CONTENT_TYPE,
            delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
        )
        where = f"'{message.routing_key}' on exchange '{message.exchange}'"
        try:
            if self._channel.is_closed:
                await asyncio.wait_for(self._channel.ready(), timeout=self._timeout)
            await exchange.publish(
                amqp, routing_key=message.routing_key, mandatory=True, timeout=self._timeout
            )
        except PublishError as e:
            raise PublishFailed(f"message {where} was not routed to any queue") from e
        except DeliveryError as e:
            raise PublishFailed(f"broker refused message {where}") from e
        except CONNECTION_EXCEPTIONS as e:
            raise PublishFailed(f"could not publish message {where}") from e

    def ensure_open(self) -> None:
        if self._connection.is_closed:
            raise PublishFailed("message broker connection is closed")
        if self._channel.is_closed:
            raise PublishFailed("message broker channel is closed")

    async def probe(self, check: Callable[[AbstractChannel], Any]) -> None:
        """Run a passive check on a throwaway channel (a failed check closes its channel)."""
        self.ensure_open()
        try:
            async with self._connection.channel(publisher_confirms=False) as channel:
                await asyncio.wait_for(check(channel), timeout=self._timeout)
        except CONNECTION_EXCEPTIONS as e:
            raise PublishFailed("message broker check failed") from e

    async def close(self) -> None:
        BROKER_LINK.closing(self._connection)
        with contextlib.suppress(*CONNECTION_EXCEPTIONS):
            await self._connection.close()


class AioPikaWorkQueue(WorkQueue):
    """Work orders to the default exchange, routed straight to the work queue."""

    def __init__(
        self,
        publisher: _ConfirmedPublisher,
        channel: AbstractRobustChannel,
        queue_name: str,
        signer: MessageSigner,
        clock: Callable[[], int],
    ) -> None:
        self._publisher = publisher
        self._channel = channel
        self._queue_name = queue_name
        self._signer = signer
        self._clock = clock

    @classmethod
    async def connect(
        cls,
        url: str,
        queue_name: str,
        signer: MessageSigner,
        clock: Callable[[], int] | None = None,
        *,
        operation_timeout: float = 10.0,
    ) -> AioPikaWorkQueue:
        publisher = await _ConfirmedPublisher.open(url, operation_timeout)
        return cls(publisher, publisher.channel, queue_name, signer, clock or unix_now)

    async def publish(self, order: WorkOrder) -> None:
        message = work_message(
            order, queue=self._queue_name, signer=self._signer, now=self._clock()
        )
        await self._publisher.send(self._channel.default_exchange, message)

    async def check(self) -> None:
        await self._publisher.probe(
            lambda channel: channel.declare_queue(self._queue_name, passive=True)
        )

    async def close(self) -> None:
        await self._publisher.close()


class AioPikaJobEventPublisher(JobEventPublisher):
    """CloudEvents to the events topic exchange, which must already exist (it is not
    declared here, as in the reference's single-tenant mode)."""

    def __init__(
        self,
        publisher: _ConfirmedPublisher,
        exchange: AbstractExchange,
        source: str,
        signer: MessageSigner,
        clock: Callable[[], int],
    ) -> None:
        self._publisher = publisher
        self._exchange = exchange
        self._source = source
        self._signer = signer
        self._clock = clock

    @classmethod
    async def connect(
        cls,
        url: str,
        exchange: str,
        source: str,
        signer: MessageSigner,
        clock: Callable[[], int] | None = None,
        *,
        operation_timeout: float = 10.0,
    ) -> AioPikaJobEventPublisher:
        if not exchange.strip() or not source:
            raise ValueError("the events exchange and the CloudEvents source are required")
        publisher = await _ConfirmedPublisher.open(url, operation_timeout)
        target = await publisher.channel.get_exchange(exchange, ensure=False)
        return cls(publisher, target, source, signer, clock or unix_now)

    async def publish(self, notification: JobNotification) -> None:
        message = job_event_message(
            notification,
            source=self._source,
            exchange=self._exchange.name,
            signer=self._signer,
            now=self._clock(),
        )
        await self._publisher.send(self._exchange, message)

    async def check(self) -> None:
        name = self._exchange.name
        await self._publisher.probe(lambda channel: channel.get_exchange(name, ensure=True))

    async def close(self) -> None:
        await self._publisher.close()
