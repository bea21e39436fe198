"""A broker outage under a running job, on the real RabbitMQ through a TCP proxy the test cuts:
the extraction is not dropped with the delivery, it finishes and is recorded, and the
redelivered message is acknowledged without effect once the broker is back."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from urllib.parse import urlsplit, urlunsplit

import pytest

from adapters.messaging.rabbitmq_consumer import RabbitWorkConsumer
from application.jobs.commands.run_job import RunLimits
from application.jobs.running import RunningJobs
from application.ports.messaging import Settlement, WorkOrder
from domain.job import JobClaimed, JobCompleted, JobRequested, JobResultStored
from domain.tenant import SINGLE_TENANT
from entrypoints.composition.worker import work_handler
from tests.integration.test_rabbitmq import AMQP_URL, NOW, Broker, _publish_order, broker
from tests.support.jobs import requested_job
from tests.support.signing import HmacTestSigner
from tests.support.tcp_proxy import proxied
from tests.support.twins import app
from tests.unit.application.jobs.test_job_lease import HeldReader

pytestmark = pytest.mark.integration

__all__ = ["app", "broker"]


def _through(port: int) -> str:
    parts = urlsplit(AMQP_URL)
    netloc = f"{parts.username}:{parts.password}@127.0.0.1:{port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def _logged(caplog, event: str) -> bool:
    return any(record.msg == event for record in caplog.records)


async def _until(condition, within: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)


async def test_a_running_job_survives_a_broker_outage_and_its_redelivery_is_acked(
    app, broker: Broker, caplog
) -> None:
    topology = broker.topology()
    await topology.apply(AMQP_URL)
    await app.connection()
    app.run_job.limits = RunLimits(retry_backoff=0.0, lease=timedelta(seconds=8))
    job = (
        await app.request_job(
            {"pgsql": {"accounts": ["id"]}}, None, {"source": "payments"}, tenant=SINGLE_TENANT
        )
    ).job
    reader = HeldReader(app.reader)
    app.run_job.reader = reader
    runs = RunningJobs(work_handler(app.run_job))
    handled: list[WorkOrder] = []

    async def handler(order: WorkOrder):
        handled.append(order)
        return await runs(order)

    await _publish_order(topology.work_queue, job)
    host, port = urlsplit(AMQP_URL).hostname or "127.0.0.1", urlsplit(AMQP_URL).port or 5672
    caplog.set_level(logging.INFO)
    async with proxied(host, port) as proxy:
        consumer = await RabbitWorkConsumer.connect(
            _through(proxy.port), topology.work_queue, HmacTestSigner(), handler,
            clock=lambda: NOW,
        )  # fmt: skip
        consuming = asyncio.create_task(consumer.run())
        try:
            await asyncio.wait_for(reader.holding.wait(), 10)
            await proxy.cut()  # the broker goes away mid-job
            await _until(lambda: _logged(caplog, "job.delivery.cancelled"), 15)
            reader.release.set()  # the extraction goes on without the broker
            await _until(lambda: len(runs) == 0)
            events = await app.store.job_events(job.id)
            assert [type(e) for e in events] == [
                JobRequested, JobClaimed, JobResultStored, JobCompleted,
            ]  # fmt: skip
            await proxy.restore()  # the broker returns: the unacked message comes back
            await _until(lambda: len(handled) == 2, 30)
            await asyncio.sleep(0.5)
        finally:
            await asyncio.wait_for(consumer.stop(), 15)
            await asyncio.wait_for(consuming, 15)
    assert len(await app.store.job_events(job.id)) == 4  # the redelivery changed nothing
    assert await broker.depth(topology.work_queue) == 0  # and it was acknowledged
    assert len(app.storage.objects) == 1


async def test_a_worker_stops_promptly_while_the_broker_is_away(app, broker: Broker) -> None:
    topology = broker.topology()
    await topology.apply(AMQP_URL)
    parts = urlsplit(AMQP_URL)
    async with proxied(parts.hostname or "127.0.0.1", parts.port or 5672) as proxy:
        consumer = await RabbitWorkConsumer.connect(
            _through(proxy.port), topology.work_queue, HmacTestSigner(),
            RunningJobs(work_handler(app.run_job)), clock=lambda: NOW, stop_timeout=1,
        )  # fmt: skip
        consuming = asyncio.create_task(consumer.run())
        await asyncio.sleep(0.2)
        await proxy.cut()
        await asyncio.sleep(0.5)
        started = asyncio.get_running_loop().time()
        await asyncio.wait_for(consumer.stop(), 30)
        await asyncio.wait_for(consuming, 5)
        assert asyncio.get_running_loop().time() - started < 15


async def test_a_worker_whose_broker_goes_away_as_it_starts_consuming_consumes_once_it_returns(
    app, broker: Broker
) -> None:
    topology = broker.topology()
    await topology.apply(AMQP_URL)
    handled: list[WorkOrder] = []

    async def handler(order: WorkOrder):
        handled.append(order)
        return Settlement.ACK

    parts = urlsplit(AMQP_URL)
    async with proxied(parts.hostname or "127.0.0.1", parts.port or 5672) as proxy:
        consumer = await RabbitWorkConsumer.connect(
            _through(proxy.port), topology.work_queue, HmacTestSigner(), handler,
            clock=lambda: NOW, stop_timeout=1,
        )  # fmt: skip
        await proxy.cut()  # gone before the consumer starts
        consuming = asyncio.create_task(consumer.run())
        try:
            await asyncio.sleep(1.0)
            assert not consuming.done()  # still trying, not dead
            await proxy.restore()
            job = requested_job(request_id="req-2")
            await _publish_order(topology.work_queue, job)
            await _until(lambda: len(handled) == 1, 30)
            assert handled[0].job_id == job.id
        finally:
            await asyncio.wait_for(consumer.stop(), 30)
            await asyncio.wait_for(consuming, 5)
