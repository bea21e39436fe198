"""The broker check of a process that publishes nothing (the API alone, the worker)."""

from __future__ import annotations

import contextlib

import aio_pika
from aio_pika.abc import AbstractRobustConnection
from aio_pika.connection import make_url
from aio_pika.exceptions import CONNECTION_EXCEPTIONS

from adapters.messaging.rabbitmq import BROKER_LINK, check_passively
from adapters.messaging.rabbitmq_topology import RabbitTopology
from application.errors import PortError


class RabbitBrokerProbe:
    """Checks that the broker answers and that the work queue and the events exchange exist,
    over one robust connection of its own kept open: each check is a throwaway channel and
    two passive declarations, so a burst of readiness probes costs no new connection. The
    caller bounds the time a check may take."""

    def __init__(self, connection: AbstractRobustConnection, topology: RabbitTopology) -> None:
        self._connection = connection
        self._topology = topology

    @classmethod
    async def connect(
        cls, url: str, topology: RabbitTopology, *, operation_timeout: float = 10.0
    ) -> RabbitBrokerProbe:
        try:
            connection = await aio_pika.connect_robust(url, timeout=operation_timeout)
        except CONNECTION_EXCEPTIONS as e:
            raise PortError("cannot connect to the message broker") from e
        BROKER_LINK.watch(connection)
        return cls(connection, topology)

    async def check(self) -> None:
        queue, exchange = self._topology.work_queue, self._topology.events_exchange
        await check_passively(
            self._connection,
            {
                f"work queue '{queue}'": lambda ch: ch.declare_queue(queue, passive=True),
                f"exchange '{exchange}'": lambda ch: ch.get_exchange(exchange, ensure=True),
            },
        )

    async def close(self) -> None:
        await BROKER_LINK.close(self._connection)


async def reach_broker(url: str, *, timeout: float = 5.0) -> None:
    """Opens one connection to the broker and closes it: raises ``PortError`` when it cannot
    be reached or refuses the login."""
    connection = aio_pika.Connection(make_url(url))
    try:
        await connection.connect(timeout=timeout)
    except CONNECTION_EXCEPTIONS as e:
        raise PortError("cannot connect to the message broker") from e
    finally:
        # Closed here even when it never connected (left to the collector, it schedules a
        # close that is never awaited).
        with contextlib.suppress(*CONNECTION_EXCEPTIONS):
            await connection.close()
