"""RabbitMQ adapters on aio-pika: the work queue and the job-event publisher.

Every publish goes out persistent, ``mandatory`` and with publisher confirms on a channel
opened with ``on_return_raises``, so it only returns once the broker has routed and stored it.
This deliberately differs from the reference for events (§5.1): the reference ignores returns,
so an event whose routing key has no bound queue is confirmed and lost; here it raises
``MessageUnroutable`` (a ``PublishFailed``), the caller retries later, and the process's
``UnroutableMessages`` makes it visible. A robust connection restores channels and consumers
but never re-sends a failed publish; that is the caller's retry.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import ClassVar

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
    DeliveryError,
    PublishError,
)

from adapters.messaging.unroutable import UnroutableMessages
from adapters.messaging.wire.amqp_fields import amqp_headers
from adapters.messaging.wire.envelope import CONTENT_TYPE, OutgoingMessage
from adapters.messaging.wire.events import EventMessages
from adapters.messaging.wire.work import WorkMessages
from application.errors import MessageUnroutable, PortError, PublishFailed
from application.ports.messaging import JobEventPublisher, WorkQueue
from application.ports.metrics import MessageKind
from application.ports.signer import MessageSigner
from application.ports.tracer import TraceCarrier
from domain.audit_chain import Checkpoint
from domain.job import Job

logger = logging.getLogger(__name__)


def unix_now() -> int:
    return int(time.time())


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

    async def close(
        self, connection: AbstractRobustConnection, *, within: float | None = None
    ) -> None:
        """Closes ``connection`` for the process (``closing``); a link already lost, or a
        broker that does not answer within ``within`` seconds, does not hold it up."""
        self.closing(connection)
        with contextlib.suppress(TimeoutError, *CONNECTION_EXCEPTIONS):
            async with asyncio.timeout(within):
                await connection.close()


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
        await BROKER_LINK.close(connection)
        raise error("cannot open a channel on the message broker") from e
    return connection, channel


async def check_passively(
    connection: AbstractRobustConnection,
    checks: Mapping[str, Callable[[AbstractChannel], Awaitable[object]]],
    *,
    error: type[PortError] = PortError,
    timeout: float | None = None,
) -> None:
    """Runs ``checks`` (passive declarations, keyed by what each checks) in order on one
    throwaway channel, as a failed check closes its channel; each may take ``timeout``
    seconds. Raises ``error``: the connection is closed, what does not exist, or the broker
    failed the check."""
    if connection.is_closed:
        raise error("message broker connection is closed")
    checking = "the broker"
    try:
        async with connection.channel(publisher_confirms=False) as channel:
            for what, check in checks.items():
                checking = what
                await asyncio.wait_for(check(channel), timeout=timeout)
    except ChannelNotFoundEntity as e:
        raise error(f"{checking} does not exist") from e
    except CONNECTION_EXCEPTIONS as e:
        raise error("message broker check failed") from e


class _ConfirmedPublisher:
    """One robust connection and a confirming channel: the publishing both publishers share
    (persistent, ``mandatory``, confirmed, a closed channel waited for, failures wrapped in
    ``PublishFailed``). A message the broker returns is told to ``unroutable``."""

    def __init__(
        self,
        connection: AbstractRobustConnection,
        channel: AbstractRobustChannel,
        *,
        timeout: float,
        unroutable: UnroutableMessages | None = None,
    ) -> None:
        self._connection = connection
        self._channel = channel
        self._timeout = timeout
        self._unroutable = unroutable

    @classmethod
    async def open(
        cls, url: str, timeout: float, unroutable: UnroutableMessages | None
    ) -> _ConfirmedPublisher:
        connection, channel = await open_channel(
            url, operation_timeout=timeout, error=PublishFailed
        )
        return cls(connection, channel, timeout=timeout, unroutable=unroutable)

    @property
    def channel(self) -> AbstractRobustChannel:
        return self._channel

    async def send(
        self,
        exchange: AbstractExchange,
        message: OutgoingMessage,
        *,
        kind: MessageKind,
        message_id: str,
    ) -> None:
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
            if self._unroutable is not None:
                self._unroutable.returned(kind, message.exchange, message.routing_key, message_id)
            raise MessageUnroutable(f"message {where} was not routed to any queue") from e
        except DeliveryError as e:
            raise PublishFailed(f"broker refused message {where}") from e
        except ChannelNotFoundEntity as e:
            raise PublishFailed(
                f"exchange '{message.exchange}' does not exist for message {where}"
            ) from e
        except CONNECTION_EXCEPTIONS as e:
            raise PublishFailed(f"could not publish message {where}") from e
        if self._unroutable is not None:
            self._unroutable.routed(message.exchange, message.routing_key)

    def ensure_open(self) -> None:
        if self._connection.is_closed:
            raise PublishFailed("message broker connection is closed")
        if self._channel.is_closed:
            raise PublishFailed("message broker channel is closed")

    async def probe(self, check: Callable[[AbstractChannel], Awaitable[object]], what: str) -> None:
        """Run a passive check of ``what`` (``check_passively``)."""
        self.ensure_open()
        await check_passively(
            self._connection, {what: check}, error=PublishFailed, timeout=self._timeout
        )

    async def close(self) -> None:
        await BROKER_LINK.close(self._connection)


class _SignedPublisher:
    """A publisher of the signed messages ``wire`` builds, to one exchange over a
    ``_ConfirmedPublisher``."""

    kind: ClassVar[MessageKind]

    def __init__(self, publisher: _ConfirmedPublisher, exchange: AbstractExchange) -> None:
        self._publisher = publisher
        self._exchange = exchange

    async def _send(self, message: OutgoingMessage, message_id: str) -> None:
        await self._publisher.send(self._exchange, message, kind=self.kind, message_id=message_id)

    async def close(self) -> None:
        await self._publisher.close()


class AioPikaWorkQueue(_SignedPublisher, WorkQueue):
    """Work orders to the default exchange, routed straight to the work queue."""

    kind = MessageKind.WORK_ORDER

    def __init__(self, publisher: _ConfirmedPublisher, messages: WorkMessages) -> None:
        super().__init__(publisher, publisher.channel.default_exchange)
        self._messages = messages

    @classmethod
    async def connect(
        cls,
        url: str,
        queue_name: str,
        signer: MessageSigner,
        clock: Callable[[], int] | None = None,
        *,
        operation_timeout: float = 10.0,
        unroutable: UnroutableMessages | None = None,
    ) -> AioPikaWorkQueue:
        publisher = await _ConfirmedPublisher.open(url, operation_timeout, unroutable)
        return cls(publisher, WorkMessages(queue_name, signer, clock or unix_now))

    async def publish(self, job: Job, trace_context: TraceCarrier | None = None) -> None:
        await self._send(self._messages.of(job, trace_context), str(job.id))

    async def check(self) -> None:
        name = self._messages.queue
        await self._publisher.probe(
            lambda channel: channel.declare_queue(name, passive=True), f"work queue '{name}'"
        )


class AioPikaJobEventPublisher(_SignedPublisher, JobEventPublisher):
    """CloudEvents to the events topic exchange, which must already exist (it is not
    declared here, as in the reference's single-tenant mode)."""

    kind = MessageKind.EVENT

    def __init__(
        self, publisher: _ConfirmedPublisher, exchange: AbstractExchange, messages: EventMessages
    ) -> None:
        super().__init__(publisher, exchange)
        self._messages = messages

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
        unroutable: UnroutableMessages | None = None,
    ) -> AioPikaJobEventPublisher:
        if not exchange.strip() or not source:
            raise ValueError("the events exchange and the CloudEvents source are required")
        publisher = await _ConfirmedPublisher.open(url, operation_timeout, unroutable)
        target = await publisher.channel.get_exchange(exchange, ensure=False)
        return cls(publisher, target, EventMessages(source, exchange, signer, clock or unix_now))

    async def publish(self, job: Job, trace_context: TraceCarrier | None = None) -> None:
        await self._send(self._messages.of(job, trace_context), f"{job.status}.{job.id}")

    async def publish_checkpoint(self, checkpoint: Checkpoint) -> None:
        message = self._messages.of_checkpoint(checkpoint)
        await self._send(message, f"audit.checkpoint.{checkpoint.position}")

    async def check(self) -> None:
        name = self._exchange.name
        await self._publisher.probe(
            lambda channel: channel.get_exchange(name, ensure=True), f"exchange '{name}'"
        )
