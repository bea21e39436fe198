"""A fresh broker, as an operator finds it: the topology Fetcher declares itself, and events
that no queue takes made visible (readiness, gauge, one log line) on the real RabbitMQ."""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import subprocess
from collections.abc import Iterator
from urllib.parse import quote
from uuid import uuid4

import aio_pika
import pytest

from adapters.memory.metrics import InMemoryMetrics
from adapters.messaging.rabbitmq import AioPikaJobEventPublisher, AioPikaWorkQueue
from adapters.messaging.unroutable import UnroutableMessages
from application.errors import MessageUnroutable, PortError
from application.ports.messaging import Settlement
from application.readiness import Readiness, Status
from entrypoints.cli.check import run_checks
from entrypoints.cli.main import main
from entrypoints.composition.infrastructure import (
    declare_broker_topology,
    open_rabbit_consumer,
    unroutable_messages,
)
from entrypoints.composition.readiness import routing_dependency
from entrypoints.settings import Settings
from tests.integration.test_rabbitmq import (  # noqa: F401
    AMQP_URL,
    SOURCE,
    Broker,
    _notification,
    _order,
    broker,
)
from tests.support.signing import HmacTestSigner

pytestmark = pytest.mark.integration

CTL = shutil.which("rabbitmqctl")


@pytest.fixture
def fresh_vhost() -> Iterator[str]:
    """The URL of a new, empty virtual host (guest may configure it), deleted afterwards."""
    if CTL is None:
        pytest.skip("rabbitmqctl is not installed: no virtual host can be made here")
    name = f"fetcher-fresh-{uuid4().hex[:8]}"

    def ctl(*args: str) -> None:
        subprocess.run([CTL, *args], check=True, capture_output=True, timeout=60)

    ctl("add_vhost", name)
    try:
        ctl("set_permissions", "-p", name, "guest", ".*", ".*", ".*")
        yield AMQP_URL.rstrip("/") + "/" + quote(name, safe="")
    finally:
        subprocess.run([CTL, "delete_vhost", name], capture_output=True, timeout=60)


def _settings(broker: Broker, **extra: str) -> Settings:  # noqa: F811
    env = {
        "RABBITMQ_URL": AMQP_URL,
        "RABBITMQ_FETCHER_WORK_QUEUE": broker.name("work.queue"),
        "RABBITMQ_JOB_EVENTS_EXCHANGE": broker.name("events"),
        **extra,
    }
    return Settings.from_env(env)


async def test_an_event_no_queue_takes_is_held_shown_and_released_once_bound(
    broker: Broker,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    topology = broker.topology(example_queues=False)
    await topology.apply(AMQP_URL)
    metrics = InMemoryMetrics()
    unroutable = unroutable_messages(_settings(broker), metrics)
    readiness = Readiness([routing_dependency(unroutable)])
    publisher = await AioPikaJobEventPublisher.connect(
        AMQP_URL, topology.events_exchange, SOURCE, HmacTestSigner(), unroutable=unroutable
    )
    event = _notification("completed")
    caplog.set_level(logging.INFO)
    try:
        for _ in range(5):  # the relay's retries of the same event
            with pytest.raises(MessageUnroutable):
                await publisher.publish(event)

        assert metrics.gauges[("unroutable", "event")] == 1
        report = await readiness.report()
        check = report.checks["rabbitmq_routing"]
        assert (report.healthy, check.status) == (False, Status.DEGRADED)
        assert check.error is not None
        assert f"bind a queue to exchange '{topology.events_exchange}'" in check.error
        assert "FETCHER_BROKER_DECLARE_TOPOLOGY=true" in check.error
        warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(warnings) == 1, [r.getMessage() for r in warnings]
        assert "routing key 'job.completed'" in warnings[0].getMessage()

        bound = broker.name("late.completed")
        broker.queues.append(bound)
        queue = await broker.channel.declare_queue(bound, auto_delete=True)
        await queue.bind(topology.events_exchange, routing_key="job.completed")
        await publisher.publish(event)
    finally:
        await publisher.close()

    assert metrics.gauges[("unroutable", "event")] == 0
    assert (await readiness.report()).healthy
    assert (await broker.get(bound)).routing_key == "job.completed"


async def test_a_work_order_to_a_missing_queue_names_the_queue_to_create(
    broker: Broker,  # noqa: F811
) -> None:
    unroutable = UnroutableMessages()
    name = broker.name("absent")
    queue = await AioPikaWorkQueue.connect(AMQP_URL, name, HmacTestSigner(), unroutable=unroutable)
    try:
        with pytest.raises(MessageUnroutable):
            await queue.publish(_order(uuid4()))
    finally:
        await queue.close()

    with pytest.raises(Exception, match=f"create queue '{name}'"):
        await unroutable.check()


async def test_the_setting_declares_the_whole_topology_on_a_fresh_vhost(
    fresh_vhost: str,
) -> None:
    settings = Settings.from_env(
        {"RABBITMQ_URL": fresh_vhost, "FETCHER_BROKER_DECLARE_TOPOLOGY": "true"}
    )

    await declare_broker_topology(settings, all_roles=False)
    await declare_broker_topology(settings, all_roles=False)  # idempotent

    unroutable = UnroutableMessages()
    publisher = await AioPikaJobEventPublisher.connect(
        fresh_vhost, settings.broker.events_exchange, SOURCE, HmacTestSigner(),
        unroutable=unroutable,
    )  # fmt: skip
    queue = await AioPikaWorkQueue.connect(
        fresh_vhost, settings.broker.work_queue, HmacTestSigner(), unroutable=unroutable
    )
    try:
        await publisher.publish(_notification("completed"))
        await publisher.publish(_notification("failed"))
        await queue.publish(_order())
    finally:
        await publisher.close()
        await queue.close()
    assert unroutable.held == 0
    connection = await aio_pika.connect(fresh_vhost)
    try:
        channel = await connection.channel()
        depths = {}
        for name in (
            "fetcher.extract-external-data.queue",
            "fetcher.job.completed.queue",
            "fetcher.job.failed.queue",
            "fetcher.dlq",
        ):
            declared = await channel.declare_queue(name, passive=True)
            depths[name] = declared.declaration_result.message_count
    finally:
        await connection.close()
    assert depths == {
        "fetcher.extract-external-data.queue": 1,
        "fetcher.job.completed.queue": 1,
        "fetcher.job.failed.queue": 1,
        "fetcher.dlq": 0,
    }


async def test_without_the_setting_a_role_declares_nothing(broker: Broker) -> None:  # noqa: F811
    settings = _settings(broker)

    await declare_broker_topology(settings, all_roles=False)

    channel = await broker.fresh_channel()
    with pytest.raises(Exception, match="NOT_FOUND"):
        await channel.declare_queue(settings.broker.work_queue, passive=True)


async def test_a_worker_without_its_queue_says_how_to_declare_it(
    broker: Broker,  # noqa: F811
) -> None:
    settings = _settings(broker)

    async def handler(order: object) -> Settlement:
        raise AssertionError("nothing is consumed")

    with pytest.raises(PortError, match=r"does not exist: set FETCHER_BROKER_DECLARE_TOPOLOGY"):
        async with open_rabbit_consumer(settings, HmacTestSigner(), handler):
            pass


async def test_the_broker_commands_write_out_and_declare_the_topology_of_the_url_s_vhost(
    fresh_vhost: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("RABBITMQ_URL", fresh_vhost)
    vhost = fresh_vhost.rsplit("/", 1)[1]

    assert main(["broker", "definitions"]) == 0
    written = json.loads(capsys.readouterr().out)
    assert written["vhosts"] == [{"name": vhost}]
    assert len(written["queues"]) == 4
    found = {f.item: f for f in await run_checks(None, ("relay",))}
    assert found["topology"].status == "FAIL"

    assert await asyncio.to_thread(main, ["broker", "declare"]) == 0
    assert f"declared the topology on vhost '{vhost}'" in capsys.readouterr().out
    topology = {f.item: f for f in await run_checks(None, ("relay",))}["topology"]
    assert topology.status == "ok"
