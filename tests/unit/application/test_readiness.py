"""Readiness and liveness over a process's dependencies (reference §7.1, §7.2)."""

from __future__ import annotations

import asyncio
import time

import pytest

from adapters.memory.metrics import InMemoryMetrics
from application.readiness import (
    DRAINING_REASON,
    TIMEOUT_ERROR,
    CheckResult,
    Dependency,
    Readiness,
    Status,
    sanitize,
)


class Switch:
    """A dependency's check that passes until ``down`` is set; counts its calls."""

    def __init__(self, *, down: bool = False, error: str = "connection refused") -> None:
        self.down = down
        self.error = error
        self.calls = 0

    async def __call__(self) -> None:
        self.calls += 1
        if self.down:
            raise ConnectionError(self.error)


async def hangs() -> None:
    await asyncio.sleep(3600)


async def test_every_dependency_up_is_healthy():
    metrics = InMemoryMetrics()
    readiness = Readiness(
        [Dependency("postgres", Switch()), Dependency("rabbitmq", Switch(), tls=False)],
        metrics=metrics,
        version="1.2.3",
        deployment_mode="byoc",
    )
    report = await readiness.report()
    assert report.healthy
    assert list(report.checks) == ["postgres", "rabbitmq"]
    assert report.checks["postgres"].status is Status.UP
    assert report.checks["postgres"].latency_ms is not None
    assert report.checks["postgres"].tls is None and report.checks["rabbitmq"].tls is False
    assert (report.version, report.deployment_mode) == ("1.2.3", "byoc")
    assert metrics.count("check", "postgres:up") == metrics.count("check", "rabbitmq:up") == 1


async def test_one_dependency_down_makes_the_process_unready_and_says_why():
    metrics = InMemoryMetrics()
    readiness = Readiness(
        [Dependency("postgres", Switch()), Dependency("s3", Switch(down=True, error="boom"))],
        metrics=metrics,
    )
    report = await readiness.report()
    assert not report.healthy
    assert report.checks["postgres"].passing
    assert report.checks["s3"] == CheckResult(
        Status.DOWN, report.checks["s3"].latency_ms, error="boom"
    )
    assert metrics.count("check", "s3:down") == 1


async def test_a_check_that_overruns_its_deadline_is_down_and_does_not_hold_the_others():
    readiness = Readiness(
        [Dependency("rabbitmq", hangs, timeout=0.2), Dependency("postgres", Switch())]
    )
    started = time.monotonic()
    report = await readiness.report()
    assert time.monotonic() - started < 1.0
    assert report.checks["rabbitmq"].status is Status.DOWN
    assert report.checks["rabbitmq"].error == TIMEOUT_ERROR
    assert report.checks["rabbitmq"].latency_ms >= 200
    assert report.checks["postgres"].passing


async def test_checks_run_at_once():
    async def slow() -> None:
        await asyncio.sleep(0.3)

    readiness = Readiness([Dependency(name, slow) for name in ("postgres", "rabbitmq", "s3")])
    started = time.monotonic()
    assert (await readiness.report()).healthy
    assert time.monotonic() - started < 0.8


async def test_nothing_is_cached_between_reports():
    check = Switch()
    readiness = Readiness([Dependency("postgres", check)])
    assert (await readiness.report()).healthy
    check.down = True
    assert not (await readiness.report()).healthy
    assert check.calls == 2


@pytest.mark.parametrize(
    ("raw", "hidden"),
    [
        ("dial amqp://fetcher:hunter2@broker:5672/ failed", "hunter2"),
        ("connect failed: host=db password=hunter2 user=x", "hunter2"),
        ("FATAL: PWD=hunter2; retry", "hunter2"),
        ("dial tcp 10.0.0.7:5432: connection refused", "10.0.0.7"),
    ],
)
def test_an_error_is_shown_without_secrets_or_addresses(raw, hidden):
    assert hidden not in sanitize(raw)


def test_an_error_is_cut_to_512_bytes_on_a_character_boundary():
    text = sanitize("é" * 600)
    assert len(text.encode()) <= 512
    assert text == "é" * 256


async def test_a_failing_checks_error_is_sanitized_in_the_report():
    secret = "cannot reach amqp://fetcher:hunter2@10.0.0.7:5672/ password=hunter2"
    readiness = Readiness([Dependency("rabbitmq", Switch(down=True, error=secret))])
    error = (await readiness.report()).checks["rabbitmq"].error
    assert error and "hunter2" not in error and "10.0.0.7" not in error


async def test_draining_answers_at_once_with_the_draining_check_alone():
    metrics = InMemoryMetrics()
    check = Switch()
    readiness = Readiness([Dependency("postgres", check)], metrics=metrics)
    readiness.start_draining()
    report = await readiness.report()
    assert not report.healthy
    assert dict(report.checks) == {
        "draining": CheckResult(Status.DOWN, reason=DRAINING_REASON),
    }
    assert check.calls == 0
    assert metrics.count("check", "draining:down") == 1
    # a tenant's checks drain too
    assert list((await readiness.report([Dependency("mongodb", check)])).checks) == ["draining"]


async def test_given_dependencies_are_checked_instead_of_the_processs_own():
    own, other = Switch(), Switch(down=True)
    readiness = Readiness([Dependency("postgres", own)])
    report = await readiness.report([Dependency("mongodb", other)])
    assert list(report.checks) == ["mongodb"] and not report.healthy
    assert own.calls == 0


async def test_skipped_and_not_applicable_checks_pass():
    report_checks = {
        "redis": CheckResult(Status.SKIPPED, reason="not configured"),
        "mongodb": CheckResult(Status.NOT_APPLICABLE, reason="multi-tenant"),
        "rabbitmq": CheckResult(Status.UP, 1),
    }
    assert all(check.passing for check in report_checks.values())
    assert not CheckResult(Status.DEGRADED, 1, error="half-open").passing


async def test_the_self_probe_makes_the_process_live_once_every_check_passed():
    metrics = InMemoryMetrics()
    database, broker = Switch(), Switch(down=True)
    readiness = Readiness(
        [Dependency("postgres", database), Dependency("rabbitmq", broker)], metrics=metrics
    )
    assert not readiness.live  # until the probe passed
    assert not await readiness.self_probe()
    assert not readiness.live
    assert metrics.gauges[("self_probe", "postgres")] == 1
    assert metrics.gauges[("self_probe", "rabbitmq")] == 0
    broker.down = False
    assert await readiness.self_probe()
    assert readiness.live and metrics.gauges[("self_probe", "rabbitmq")] == 1
    # a later outage shows on readiness, not on liveness
    broker.down = True
    assert not (await readiness.report()).healthy
    assert readiness.live


async def test_the_self_probe_does_not_count_as_a_readiness_check():
    metrics = InMemoryMetrics()
    await Readiness([Dependency("postgres", Switch())], metrics=metrics).self_probe()
    assert metrics.count("check", "postgres:up") == 0


async def test_a_process_with_nothing_to_check_is_live():
    assert Readiness().live


async def test_the_self_probe_is_repeated_until_it_passes():
    broker = Switch(down=True)
    readiness = Readiness([Dependency("rabbitmq", broker)])
    stop = asyncio.Event()
    probing = asyncio.create_task(readiness.probe_until_live(stop, interval=0.05))
    await asyncio.sleep(0.2)
    assert not readiness.live and broker.calls >= 2
    broker.down = False
    await asyncio.wait_for(probing, 2)
    assert readiness.live


async def test_repeating_the_self_probe_ends_when_stopped():
    readiness = Readiness([Dependency("rabbitmq", Switch(down=True))])
    stop = asyncio.Event()
    probing = asyncio.create_task(readiness.probe_until_live(stop, interval=0.05))
    await asyncio.sleep(0.1)
    stop.set()
    await asyncio.wait_for(probing, 1)
    assert not readiness.live


async def test_probes_at_the_same_moment_share_the_check_then_running():
    calls = 0

    async def slow() -> None:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.2)

    readiness = Readiness([Dependency("rabbitmq", slow)])
    reports = await asyncio.gather(*(readiness.report() for _ in range(20)))
    assert all(report.healthy for report in reports)
    assert calls == 1
    await readiness.report()
    assert calls == 2  # nothing kept once it ended


async def test_a_probe_that_goes_away_leaves_the_shared_check_to_the_others():
    async def slow() -> None:
        await asyncio.sleep(0.2)

    readiness = Readiness([Dependency("rabbitmq", slow)])
    first = asyncio.create_task(readiness.report())
    second = asyncio.create_task(readiness.report())
    await asyncio.sleep(0.05)
    first.cancel()
    assert (await second).healthy
