"""The reference broker topology (§6.4): declared by Fetcher, checked, or written out as
RabbitMQ definitions for any virtual host. One description serves all three, so a broker
loaded from the definitions and Fetcher's own declaration never disagree."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import aio_pika
from aio_pika.abc import AbstractChannel, AbstractExchange, AbstractQueue
from aio_pika.exceptions import (
    CONNECTION_EXCEPTIONS,
    ChannelNotFoundEntity,
    ChannelPreconditionFailed,
)

from adapters.messaging.wire.events import EVENTS_EXCHANGE
from adapters.messaging.wire.work import WORK_QUEUE
from application.errors import PortError

EXAMPLE_EVENT_QUEUES = (
    ("fetcher.job.completed.queue", "job.completed"),
    ("fetcher.job.failed.queue", "job.failed"),
)
"""The reference's example queues for job events and their routing keys (consumers bind
their own; these keep events from being unroutable on a fresh broker)."""


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
    event_queues: tuple[tuple[str, str], ...] = EXAMPLE_EVENT_QUEUES
    """Queues bound to the events exchange, with their routing keys."""

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

    def _exchanges(self) -> tuple[tuple[str, aio_pika.ExchangeType], ...]:
        return (
            (self.work_exchange, aio_pika.ExchangeType.DIRECT),
            (self.dead_letter_exchange, aio_pika.ExchangeType.DIRECT),
            (self.events_exchange, aio_pika.ExchangeType.TOPIC),
        )

    def _queues(self) -> tuple[tuple[str, dict[str, Any]], ...]:
        return (
            (self.work_queue, self.work_queue_arguments()),
            (self.dead_letter_queue, self.dead_letter_queue_arguments()),
            *((name, {}) for name, _ in self.event_queues),
        )

    def _bindings(self) -> tuple[tuple[str, str, str], ...]:
        """(exchange, queue, routing key)."""
        return (
            (self.work_exchange, self.work_queue, self.work_routing_key),
            (self.dead_letter_exchange, self.dead_letter_queue, self.dead_letter_routing_key),
            *((self.events_exchange, name, key) for name, key in self.event_queues),
        )

    def definitions(self, vhost: str = "/") -> dict[str, Any]:
        """The topology as RabbitMQ definitions for the virtual host ``vhost`` (for
        ``rabbitmqctl import_definitions``, the management API, or ``load_definitions``)."""
        return {
            "vhosts": [{"name": vhost}],
            "exchanges": [
                {
                    "name": name,
                    "vhost": vhost,
                    "type": kind.value,
                    "durable": True,
                    "auto_delete": False,
                    "internal": False,
                    "arguments": {},
                }
                for name, kind in self._exchanges()
            ],
            "queues": [
                {
                    "name": name,
                    "vhost": vhost,
                    "durable": True,
                    "auto_delete": False,
                    "arguments": arguments,
                }
                for name, arguments in self._queues()
            ],
            "bindings": [
                {
                    "source": exchange,
                    "vhost": vhost,
                    "destination": queue,
                    "destination_type": "queue",
                    "routing_key": key,
                    "arguments": {},
                }
                for exchange, queue, key in self._bindings()
            ],
        }

    async def declare(self, channel: AbstractChannel, *, passive: bool = False) -> None:
        """Declare everything and bind it (idempotent: same names, same arguments). With
        ``passive`` only check that what Fetcher uses exists (the work queue, the dead-letter
        exchange and queue, the events exchange), changing nothing, for brokers provisioned
        from definitions where this user may not configure; the example event queues are not
        required then (consumers bind their own). An entity that exists with other settings,
        or is missing in passive mode, raises ``PortError``; the channel is closed by the
        broker then, so use a dedicated one."""
        name = ""
        try:
            exchanges: dict[str, AbstractExchange] = {}
            for name, kind in self._exchanges():
                if passive and name == self.work_exchange:
                    continue  # unused by the code (§6.4)
                exchanges[name] = await channel.declare_exchange(
                    name, kind, durable=True, passive=passive
                )
            queues: dict[str, AbstractQueue] = {}
            for name, arguments in self._queues():
                if passive and name not in {self.work_queue, self.dead_letter_queue}:
                    continue
                queues[name] = await channel.declare_queue(
                    name, durable=True, arguments=arguments, passive=passive
                )
            if passive:
                return
            for exchange, name, key in self._bindings():
                await queues[name].bind(exchanges[exchange], routing_key=key)
        except ChannelPreconditionFailed as e:
            raise PortError(f"broker entity '{name}' exists with different settings") from e
        except ChannelNotFoundEntity as e:
            raise PortError(f"broker entity '{name}' does not exist") from e
        except CONNECTION_EXCEPTIONS as e:
            raise PortError(f"could not declare broker entity '{name}'") from e

    async def apply(
        self, url: str, *, passive: bool = False, operation_timeout: float = 10.0
    ) -> None:
        """Declare (or, ``passive``, check) the topology over a short-lived connection of its
        own, on the virtual host of ``url``."""
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
