"""The broker probe of the processes that publish nothing, against the real broker."""

from __future__ import annotations

import asyncio

import pytest

from adapters.messaging.rabbitmq_probe import RabbitBrokerProbe
from adapters.messaging.rabbitmq_topology import RabbitTopology
from application.errors import PortError
from tests.integration.test_rabbitmq import AMQP_URL, broker  # noqa: F401  (fixture)

pytestmark = pytest.mark.integration


async def test_passes_when_the_topology_exists_and_shares_one_connection(broker):  # noqa: F811
    topology = broker.topology()
    await topology.apply(AMQP_URL)
    probe = await RabbitBrokerProbe.connect(AMQP_URL, topology)
    try:
        await asyncio.gather(*(probe.check() for _ in range(30)))
        await probe.check()  # a check leaves the connection usable
    finally:
        await probe.close()
    with pytest.raises(PortError, match="closed"):
        await probe.check()


async def test_fails_when_the_work_queue_or_the_exchange_is_missing(broker):  # noqa: F811
    topology = broker.topology()
    probe = await RabbitBrokerProbe.connect(AMQP_URL, topology)
    try:
        with pytest.raises(PortError, match="does not exist"):
            await probe.check()
        await topology.apply(AMQP_URL)
        await probe.check()  # the connection survived the failed check
        channel = await broker.fresh_channel()
        await channel.exchange_delete(topology.events_exchange)
        with pytest.raises(PortError, match="does not exist"):
            await probe.check()
    finally:
        await probe.close()


async def test_an_unreachable_broker_is_refused_at_once():
    with pytest.raises(PortError, match="cannot connect"):
        await RabbitBrokerProbe.connect(
            "amqp://guest:guest@127.0.0.1:1/", RabbitTopology(), operation_timeout=2
        )
