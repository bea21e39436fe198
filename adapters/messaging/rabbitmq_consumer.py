"""The RabbitMQ work consumer: verified, parsed deliveries handed to the work handler."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from aio_pika.abc import AbstractIncomingMessage, AbstractQueue, AbstractRobustConnection
from aio_pika.exceptions import CONNECTION_EXCEPTIONS, ChannelNotFoundEntity

from adapters.common.lifecycle import RunUntilStopped
from adapters.messaging.delivery import DeliveryProcessor, drain
from adapters.messaging.rabbitmq import BROKER_LINK, open_channel, unix_now
from application.errors import PortError
from application.ports.messaging import Settlement, WorkConsumer, WorkHandler
from application.ports.signer import MessageSigner

logger = logging.getLogger(__name__)

BROKER_GONE_SECONDS = 5.0
"""How long stopping waits on the broker for a consumer cancel or a connection close."""

CONSUME_RETRY_SECONDS = 0.5
"""The first wait before trying again to start consuming (doubling up to 5 s)."""


class RabbitWorkConsumer(WorkConsumer):
    """Consumes the work queue, at most ``prefetch`` deliveries in flight.

    Each delivery is verified with the internal signer against the delivery's own exchange and
    routing key, parsed, and handed to ``handler``; see ``DeliveryProcessor`` for how
    settlements and errors are served. ``run()`` consumes until ``stop()``; stopping cancels
    the consumer, lets in-flight handlers finish for up to ``stop_timeout`` seconds, then
    cancels the rest (their deliveries return to the queue when the channel closes).
    """

    def __init__(
        self,
        connection: AbstractRobustConnection,
        queue: AbstractQueue,
        deliveries: DeliveryProcessor,
        *,
        stop_timeout: float = 30.0,
    ) -> None:
        self._connection = connection
        self._queue = queue
        self._deliveries = deliveries
        self._stop_timeout = stop_timeout
        self._lifecycle = RunUntilStopped()
        self._stopping = self._lifecycle.stopping
        self._inflight: set[asyncio.Task[Any]] = set()

    @classmethod
    async def connect(
        cls,
        url: str,
        queue_name: str,
        signer: MessageSigner,
        handler: WorkHandler,
        *,
        prefetch: int = 4,
        clock: Callable[[], int] | None = None,
        retry_delay: float = 1.0,
        error_backoff: float = 1.0,
        max_backoff: float = 30.0,
        stop_timeout: float = 30.0,
        operation_timeout: float = 10.0,
    ) -> RabbitWorkConsumer:
        if prefetch < 1:
            raise ValueError("prefetch must be at least 1")
        connection, channel = await open_channel(url, operation_timeout=operation_timeout)
        try:
            await channel.set_qos(prefetch_count=prefetch)
            queue = await channel.declare_queue(queue_name, passive=True)
        except ChannelNotFoundEntity as e:
            await BROKER_LINK.close(connection)
            raise PortError(f"work queue '{queue_name}' does not exist") from e
        except CONNECTION_EXCEPTIONS as e:
            await BROKER_LINK.close(connection)
            raise PortError("cannot consume the work queue") from e
        deliveries = DeliveryProcessor(
            signer=signer,
            handler=handler,
            clock=clock or unix_now,
            retry_delay=retry_delay,
            error_backoff=error_backoff,
            max_backoff=max_backoff,
        )
        return cls(connection, queue, deliveries, stop_timeout=stop_timeout)

    async def run(self) -> None:
        with self._lifecycle.running():
            tag = await self._start_consuming()
            if tag is None:
                await self._close()
                return
            try:
                await self._stopping.wait()
            finally:
                self._stopping.set()
                await self._shutdown(tag)

    async def _start_consuming(self) -> str | None:
        """Starts the consumer; a broker that goes away meanwhile is waited for (the robust
        connection reconnects), trying again with backoff until it succeeds or the consumer
        is stopped (None). Once started, the robust channel restores the consumer itself."""
        delay = CONSUME_RETRY_SECONDS
        failing = False
        while not self._stopping.is_set():
            try:
                tag = await self._queue.consume(self._on_message)
            except CONNECTION_EXCEPTIONS as e:
                if not failing:
                    logger.warning(
                        "could not start consuming the work queue (%s); trying again",
                        type(e).__name__,
                    )
                    failing = True
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await self._stopping.wait()
                delay = min(delay * 2, BROKER_GONE_SECONDS)
                continue
            if failing:
                logger.info("consuming the work queue")
            return str(tag)
        return None

    async def stop(self) -> None:
        if not await self._lifecycle.stop():
            await self._close()

    async def _on_message(self, message: AbstractIncomingMessage) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._inflight.add(task)
        try:
            settlement = await self._deliveries.process(
                headers=message.headers or {},
                body=message.body,
                exchange=message.exchange or "",
                routing_key=message.routing_key or "",
                stopping=self._stopping,
            )
            await self._settle(message, settlement)
        finally:
            if task is not None:
                self._inflight.discard(task)

    @staticmethod
    async def _settle(message: AbstractIncomingMessage, settlement: Settlement) -> None:
        try:
            if settlement is Settlement.ACK:
                await message.ack()
            else:
                await message.nack(requeue=settlement is Settlement.REQUEUE)
        except CONNECTION_EXCEPTIONS as e:
            logger.warning(
                "could not settle work delivery (%s); the broker will redeliver it",
                type(e).__name__,
            )

    async def _shutdown(self, tag: str) -> None:
        # While the broker is away, the robust channel would wait for it to return.
        with contextlib.suppress(TimeoutError, *CONNECTION_EXCEPTIONS):
            async with asyncio.timeout(BROKER_GONE_SECONDS):
                await self._queue.cancel(tag)
        await drain(self._inflight, self._stop_timeout)
        await self._close()

    async def _close(self) -> None:
        await BROKER_LINK.close(self._connection, within=BROKER_GONE_SECONDS)
