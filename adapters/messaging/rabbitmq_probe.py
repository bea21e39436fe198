"""The broker check of a process that publishes nothing (the API alone, the worker)."""

from __future__ import annotations

import contextlib

import aio_pika
from aio_pika.abc import AbstractRobustConnection
from aio_pika.exceptions import CONNECTION_EXCEPTIONS, ChannelNotFoundEntity

from adapters.messaging.rabbitmq import RabbitTopology
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
        return cls(connection, topology)

    async def check(self) -> None:
        if self._connection.is_closed:
            raise PortError("message broker connection is closed")
        topology = self._topology
        try:
            async with self._connection.channel(publisher_confirms=False) as channel:
                await channel.declare_queue(topology.work_queue, passive=True)
                await channel.get_exchange(topology.events_exchange, ensure=True)
        except ChannelNotFoundEntity as e:
            raise PortError("the work queue or the events exchange does not exist") from e
        except CONNECTION_EXCEPTIONS as e:
            raise PortError("message broker check failed") from e

    async def close(self) -> None:
        with contextlib.suppress(*CONNECTION_EXCEPTIONS):
            await self._connection.close()
