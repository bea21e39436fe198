"""A role waits for its dependencies: one line when one is found down, one when it answers,
backoff in between; what it waits for follows its settings and roles."""

from __future__ import annotations

import asyncio
import logging

import pytest
from litestar.testing import AsyncTestClient

from application.readiness import Dependency, Readiness
from entrypoints.composition.readiness import DependencyWaiter, Needed, needed_by
from entrypoints.http.ops import create_starting_app
from entrypoints.roles import Probes, Role
from entrypoints.settings import Settings

KEY = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="


class Flaky:
    """A check that fails ``failures`` times (with a secret in its error), then passes."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0

    async def __call__(self) -> None:
        self.calls += 1
        if self.calls <= self.failures:
            raise ConnectionRefusedError("connect to amqp://fetcher:hunter2@10.1.2.3:5672 refused")


def needed(name: str, check: Flaky, what: str = "the message broker") -> Needed:
    return Needed(Dependency(name, check), what, "rabbitmq:5672")


async def test_a_dependency_down_then_up_is_one_line_each_way(caplog):
    broker = Flaky(failures=4)
    waiter = DependencyWaiter([needed("rabbitmq", broker)], first_retry=0.01, max_retry=0.02)
    with caplog.at_level(logging.INFO, logger="fetcher"):
        assert await waiter.wait(asyncio.Event()) is True
    assert broker.calls == 5
    lines = [r.getMessage() for r in caplog.records if r.name == "fetcher"]
    assert len(lines) == 2, lines
    assert lines[0].startswith("waiting for the message broker at rabbitmq:5672 (")
    assert "hunter2" not in lines[0] and "10.1.2.3" not in lines[0]
    assert lines[1] == "the message broker at rabbitmq:5672 is reachable"


async def test_dependencies_up_at_once_log_nothing(caplog):
    waiter = DependencyWaiter([needed("postgres", Flaky(0), "the database")])
    with caplog.at_level(logging.INFO, logger="fetcher"):
        assert await waiter.wait(asyncio.Event()) is True
        assert await waiter.reachable() is True
    assert [r for r in caplog.records if r.name == "fetcher"] == []


async def test_the_wait_backs_off_and_ends_when_stopped():
    broker = Flaky(failures=10**6)
    waiter = DependencyWaiter([needed("rabbitmq", broker)], first_retry=0.05, max_retry=0.2)
    stop = asyncio.Event()
    waiting = asyncio.create_task(waiter.wait(stop))
    await asyncio.sleep(0.6)
    stop.set()
    assert await asyncio.wait_for(waiting, 1) is False
    # 0.05, 0.1, 0.2, 0.2 ...: a handful of attempts, not one per loop turn.
    assert 3 <= broker.calls <= 7


def test_what_a_role_waits_for_follows_its_settings_and_roles():
    production = Settings.from_env(
        {
            "APP_ENC_KEY": KEY,
            "FETCHER_DATABASE_URL": "postgresql://u:secret@db.internal:6543/fetcher",
            "RABBITMQ_URL": "amqps://u:secret@mq.internal:5671/",
            "OBJECT_STORAGE_ENDPOINT": "http://s3.internal:9000",
            "OBJECT_STORAGE_BUCKET": "results",
        }
    )
    worker = needed_by(production, {Role.WORKER})
    assert [(n.dependency.name, n.where) for n in worker] == [
        ("postgres", "db.internal:6543"),
        ("rabbitmq", "mq.internal:5671"),
        ("s3", "s3.internal:9000"),
    ]
    assert worker[1].dependency.tls is True
    assert [n.dependency.name for n in needed_by(production, {Role.API})] == [
        "postgres",
        "rabbitmq",
    ]
    embedded = Settings.from_env({})
    assert needed_by(embedded, {Role.API, Role.WORKER, Role.RELAY}) == []


async def test_readiness_can_switch_to_the_checks_of_what_was_opened():
    readiness = Readiness([Dependency("rabbitmq", Flaky(10**6))])
    assert not (await readiness.report()).healthy
    readiness.use([Dependency("rabbitmq", Flaky(0)), Dependency("s3", Flaky(0))])
    report = await readiness.report()
    assert report.healthy and set(report.checks) == {"rabbitmq", "s3"}


@pytest.mark.parametrize("method", ["GET", "POST", "DELETE"])
async def test_while_starting_the_api_port_answers_probes_and_503_in_the_error_shape(method):
    probes = Probes(Readiness([Dependency("postgres", Flaky(10**6))]))
    async with AsyncTestClient(create_starting_app(probes)) as client:
        response = await client.request(method, "/v1/fetcher")
        assert response.status_code == 503
        body = response.json()
        assert body["code"] == "FET-0003" and body["title"] == "Service Unavailable"
        assert "starting" in body["message"]
        ready = await client.get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["checks"]["postgres"]["status"] == "down"
        assert (await client.get("/health")).status_code == 503


async def test_a_starting_role_is_not_ready_even_once_its_dependencies_answer():
    from adapters.metrics.prometheus import PrometheusMetrics
    from entrypoints.composition.readiness import starting_probes

    waiter = DependencyWaiter([needed("rabbitmq", Flaky(0))])
    probes = starting_probes(
        Settings.from_env({}), waiter, PrometheusMetrics(process_collectors=False)
    )
    report = await probes.readiness.report()
    assert report.checks["rabbitmq"].status == "up"
    assert report.checks["starting"].status == "down" and not report.healthy
    assert not probes.readiness.live
