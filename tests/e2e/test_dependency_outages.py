"""Dependencies that go away and come back, through TCP proxies in front of the shared
PostgreSQL and RabbitMQ: roles started without them wait and report not ready, outages are
one log line per change, and requests and jobs caught in an outage end cleanly."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator

import asyncpg
import httpx
import pytest

from adapters.storage.s3 import S3ResultStorage, S3Settings
from application.errors import StorageError
from tests.e2e.behind_proxies import (
    EventCollector,
    ProxiedStack,
    proxied_stack,
    readyz,
    wait_ready,
)
from tests.e2e.conftest import S3_ACCESS, S3_BUCKET, S3_ENDPOINT, S3_SECRET
from tests.e2e.test_job_flow import PRODUCT, register

ROLES = ("api", "worker", "relay")


@pytest.fixture
def stack(
    run_id: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ProxiedStack]:
    tag = f"{run_id}_{request.node.name[5:25]}"
    yield from proxied_stack(
        tag,
        tmp_path_factory.mktemp("outage-logs"),
        tmp_path_factory.mktemp("outage-data"),
        FETCHER_DISPATCH_TIMEOUT_SECONDS="6",
    )


def _post(api: str, tag: str, config: str = "outage_pg") -> httpx.Response:
    return httpx.post(
        f"{api}/v1/fetcher",
        json={
            "dataRequest": {"mappedFields": {config: {"accounts": ["id"]}}},
            "metadata": {"source": PRODUCT, "tag": tag},
        },
        timeout=60,
    )


def _one_error_shape(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["code"] == code and body["title"] and body["message"], body
    assert set(body) <= {"code", "title", "message", "fields", "entityType"}, body


def _quiet(stack: ProxiedStack, name: str) -> list[str]:
    """The lines of a process's log that are neither tracebacks nor ERROR: what must hold."""
    text = stack.log(name)
    assert "Traceback" not in text, f"{name}:\n{text[-4000:]}"
    errors = [line for line in text.splitlines() if " ERROR " in line]
    assert errors == [], f"{name}:\n{text[-4000:]}"
    return text.splitlines()


async def _requested_jobs(stack: ProxiedStack) -> int:
    conn = await asyncpg.connect(stack.store_url)
    try:
        return int(
            await conn.fetchval(
                "SELECT count(*) FROM stored_events WHERE topic = 'domain.job:JobRequested'"
            )
        )
    finally:
        await conn.close()


async def _object_exists(key: str) -> bool:
    storage = await S3ResultStorage.open(
        S3Settings(
            bucket=S3_BUCKET,
            endpoint_url=S3_ENDPOINT,
            access_key_id=S3_ACCESS,
            secret_access_key=S3_SECRET,
            use_path_style=True,
        )
    )
    try:
        await storage.read(key)
    except StorageError:
        return False
    finally:
        await storage.close()
    return True


async def test_roles_started_without_broker_and_database_wait_then_work(
    stack: ProxiedStack, source_database: str
) -> None:
    processes = stack.processes
    stack.broker.cut()
    stack.database.cut()
    for role in ROLES:
        processes.start(role)
    urls = {"api": stack.api, **{r: processes.health_urls[r] for r in ("worker", "relay")}}

    # Waiting: every role is up, not ready, and names what is down.
    deadline = time.monotonic() + 30
    reports: dict[str, httpx.Response] = {}
    while len(reports) < len(urls) and time.monotonic() < deadline:
        for role, url in urls.items():
            response = readyz(url)
            if response is not None and "postgres" in response.json().get("checks", {}):
                reports[role] = response
        time.sleep(0.2)
    assert set(reports) == set(urls), processes.tail()
    for role, response in reports.items():
        assert response.status_code == 503, (role, response.text)
        checks = response.json()["checks"]
        assert checks["postgres"]["status"] == "down", (role, checks)
        assert checks["rabbitmq"]["status"] == "down", (role, checks)
    _one_error_shape(_post(stack.api, "too-early"), 503, "FET-0003")
    time.sleep(3)  # a few attempts: still one line each
    assert all(proc.poll() is None for proc in processes.procs), processes.tail()

    stack.database.restore()
    time.sleep(3)
    stack.broker.restore()
    for url in urls.values():
        wait_ready(url, processes)
    for role in ROLES:
        lines = _quiet(stack, role)
        database_down = [line for line in lines if "waiting for the database at" in line]
        broker_down = [line for line in lines if "waiting for the message broker at" in line]
        assert len(database_down) == 1, (role, lines)
        assert len(broker_down) <= 1, (role, lines)
        assert sum("the database at" in line and "is reachable" in line for line in lines) == 1

    # And it works: a job ends with its event.
    async with EventCollector(stack.exchange) as events:
        register(stack.api, source_database, "outage_pg")
        response = _post(stack.api, "after-start")
        assert response.status_code == 202, response.text
        job_id = response.json()["jobId"]
        missing = await events.until({job_id}, timeout=60)
        assert not missing, processes.tail()
        assert events.events[job_id][0][0] == "job.completed"

        # A broker outage while running: one line when lost, one when back, per process.
        stack.broker.cut()
        time.sleep(4)
        stack.broker.restore()
        for url in urls.values():
            wait_ready(url, processes)
        response = _post(stack.api, "after-outage")
        assert response.status_code == 202, response.text
        second = response.json()["jobId"]
        assert not await events.until({second}, timeout=90), processes.tail()
    for role in ("worker", "relay"):
        lines = _quiet(stack, role)
        assert sum("message broker connection lost" in line for line in lines) == 1, lines
        assert sum("message broker connection restored" in line for line in lines) == 1, lines


async def test_broker_down_past_the_dispatch_limit_fails_the_job_with_an_event(
    stack: ProxiedStack, source_database: str
) -> None:
    processes = stack.processes
    for role in ROLES:
        processes.start(role)
    processes.wait_healthy()
    wait_ready(processes.health_urls["relay"], processes)
    register(stack.api, source_database, "outage_pg")
    async with EventCollector(stack.exchange) as events:
        stack.broker.cut()
        response = _post(stack.api, "broker-down")
        # Recording the job needs the event store only: it is accepted.
        assert response.status_code == 202, response.text
        job_id = response.json()["jobId"]
        # Past the 6 s dispatch limit, at the dispatcher's next attempt (each publish waits
        # up to 10 s for the broker), the job fails.
        deadline = time.monotonic() + 45
        while time.monotonic() < deadline:
            job = httpx.get(f"{stack.api}/v1/fetcher/{job_id}").json()
            if job["status"] == "failed":
                break
            time.sleep(0.5)
        assert job["status"] == "failed", (job, processes.tail())
        assert await events.until({job_id}, timeout=1) == {job_id}  # nothing can go out yet

        stack.broker.restore()
        assert not await events.until({job_id}, timeout=60), processes.tail()
    delivered = events.events[job_id]
    assert {routing for routing, *_ in delivered} == {"job.failed"}
    assert len({bytes(headers["ce-id"]) for _, headers, *_ in delivered}) == 1
    body = json.loads(delivered[0][2])
    assert body["metadata"]["error"]["message"] == "process failed: unable to publish"
    history = httpx.get(f"{stack.api}/v1/fetcher/{job_id}/events").json()["events"]
    assert [e["type"] for e in history] == ["Requested", "Failed"]
    assert not await _object_exists(f"{stack.key_prefix}external-data/{job_id}.json")
    for role in ROLES:
        _quiet(stack, role)


async def test_event_store_down_answers_503_and_nothing_is_half_written(
    stack: ProxiedStack, source_database: str
) -> None:
    processes = stack.processes
    for role in ROLES:
        processes.start(role)
    processes.wait_healthy()
    register(stack.api, source_database, "outage_pg")
    before = await _requested_jobs(stack)

    stack.database.cut()
    started = time.monotonic()
    refused = await asyncio.gather(
        *(asyncio.to_thread(_post, stack.api, "db-down") for _ in range(5))
    )
    for response in refused:
        _one_error_shape(response, 503, "FET-0003")
    assert time.monotonic() - started < 30
    _one_error_shape(
        httpx.get(f"{stack.api}/v1/fetcher/0191c3b6-6a3d-7c2e-8b1a-2f3c4d5e6f70", timeout=30),
        503,
        "FET-0003",
    )
    ready = readyz(stack.api)
    assert ready is not None and ready.status_code == 503
    assert ready.json()["checks"]["postgres"]["status"] == "down"

    stack.database.restore()
    wait_ready(stack.api, processes)
    assert await _requested_jobs(stack) == before  # no job from the refused requests
    async with EventCollector(stack.exchange) as events:
        # The SQL pool pings no connection at checkout: the first statement on a connection
        # the outage dropped fails (503) and renews the pool, so a client's retry gets in.
        for _ in range(3):
            response = _post(stack.api, "db-down")
            if response.status_code != 503:
                break
            _one_error_shape(response, 503, "FET-0003")
        # The same request again is a new job (no dedup slot was left behind).
        assert response.status_code == 202, response.text
        job_id = response.json()["jobId"]
        assert not await events.until({job_id}, timeout=90), processes.tail()
    assert events.events[job_id][0][0] == "job.completed"
    assert await _requested_jobs(stack) == before + 1
    for role in ROLES:
        _quiet(stack, role)
