"""Unroutable messages are held per destination, shown on readiness and a gauge, and told in
one warning per destination (repeated at most every few minutes), until one is routed."""

from __future__ import annotations

import logging

import pytest

from adapters.memory.metrics import InMemoryMetrics
from adapters.messaging.unroutable import UnroutableMessages
from application.ports.metrics import MessageKind
from application.readiness import Dependency, Readiness, Status

EXCHANGE = "fetcher.job.events"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


async def test_nothing_held_is_ready() -> None:
    unroutable = UnroutableMessages()

    await unroutable.check()
    unroutable.routed(EXCHANGE, "job.completed")

    assert unroutable.held == 0


async def test_a_returned_event_is_held_counted_and_degrades_readiness() -> None:
    metrics = InMemoryMetrics()
    unroutable = UnroutableMessages(metrics, remedy="or set THE_SETTING=true")

    unroutable.returned(MessageKind.EVENT, EXCHANGE, "job.completed", "completed.a")
    unroutable.returned(MessageKind.EVENT, EXCHANGE, "job.completed", "completed.a")
    unroutable.returned(MessageKind.EVENT, EXCHANGE, "job.failed", "failed.b")

    assert unroutable.held == 2
    assert metrics.gauges[("unroutable", "event")] == 2
    report = await Readiness([Dependency("rabbitmq_routing", unroutable.check)]).report()
    check = report.checks["rabbitmq_routing"]
    assert check.status is Status.DEGRADED
    assert not report.healthy
    assert check.error is not None
    assert (
        "1 job event to exchange 'fetcher.job.events' with routing key 'job.completed' "
        "reached no queue and is held: bind a queue to exchange 'fetcher.job.events' with "
        "routing key 'job.completed' (or '#'), or set THE_SETTING=true"
    ) in check.error
    assert "routing key 'job.failed'" in check.error


async def test_a_degraded_check_keeps_the_process_live() -> None:
    unroutable = UnroutableMessages()
    unroutable.returned(MessageKind.EVENT, EXCHANGE, "job.completed", "completed.a")
    readiness = Readiness([Dependency("rabbitmq_routing", unroutable.check)])

    assert await readiness.self_probe()
    assert readiness.live


async def test_a_routed_publish_releases_its_destination_only() -> None:
    metrics = InMemoryMetrics()
    unroutable = UnroutableMessages(metrics)
    unroutable.returned(MessageKind.EVENT, EXCHANGE, "job.completed", "completed.a")
    unroutable.returned(MessageKind.WORK_ORDER, "", "fetcher.work", "job-1")

    unroutable.routed(EXCHANGE, "job.completed")

    assert unroutable.held == 1
    assert metrics.gauges[("unroutable", "event")] == 0
    assert metrics.gauges[("unroutable", "work_order")] == 1
    with pytest.raises(Exception, match=r"1 work order to queue 'fetcher\.work'.*create queue"):
        await unroutable.check()
    unroutable.routed("", "fetcher.work")
    await unroutable.check()


def test_one_warning_per_destination_repeated_at_most_every_few_minutes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    unroutable = UnroutableMessages(repeat_seconds=600, clock=clock)
    caplog.set_level(logging.INFO, logger="adapters.messaging.unroutable")

    for second in range(0, 599, 10):
        clock.now = 1000.0 + second
        unroutable.returned(MessageKind.EVENT, EXCHANGE, "job.completed", "completed.a")
    assert len(_warnings(caplog)) == 1
    assert "bind a queue to exchange 'fetcher.job.events'" in _warnings(caplog)[0]

    clock.now = 1000.0 + 600
    unroutable.returned(MessageKind.EVENT, EXCHANGE, "job.completed", "completed.b")
    assert len(_warnings(caplog)) == 2
    assert "2 job events" in _warnings(caplog)[1]

    unroutable.routed(EXCHANGE, "job.completed")
    assert "routed again" in caplog.records[-1].getMessage()
    unroutable.returned(MessageKind.EVENT, EXCHANGE, "job.completed", "completed.c")
    assert len(_warnings(caplog)) == 3  # unroutable again after it was routed: told again
