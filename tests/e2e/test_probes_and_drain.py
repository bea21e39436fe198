"""Probes and drain of the real processes, as the reference's own end-to-end expectations
check them: the `/readyz` layout of each role, `/health`, `/metrics`, and the drain on SIGTERM
(readiness 503 `draining`, then the listener closes, in-flight work finishes, exit 0, no job
lost)."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor

import asyncpg
import httpx
import pytest
from asyncpg.transaction import Transaction
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.conftest import (
    MASTER_KEY,
    PG_ADMIN,
    RABBIT,
    S3_ACCESS,
    S3_BUCKET,
    S3_ENDPOINT,
    S3_SECRET,
    Processes,
    base_env,
    create_database,
    drop_database,
    free_port,
    pg_url,
)
from tests.e2e.test_claim_race import _delete_broker_entities
from tests.e2e.test_job_flow import events_queue, register, submit  # noqa: F401  (fixture)
from tests.integration.conftest import require_listening

TOP_LEVEL = {"status", "checks", "version", "deployment_mode", "tenant_id"}
STATUSES = {"up", "down", "degraded", "skipped", "n/a"}
READYZ_FAMILIES = ("readyz_check_duration_ms", "readyz_check_status", "selfprobe_result")
DRAINING = {"draining": {"status": "down", "reason": "graceful drain in progress"}}
DRAIN_SECONDS = 3


def wait_up(url: str, processes: Processes, timeout: float = 60.0) -> None:
    """Until ``url/health`` answers 200 (a process that failed meanwhile ends the wait)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(proc.poll() not in (None, 0) for proc in processes.procs):
            raise RuntimeError(f"a fetcher process failed:\n{processes.tail()}")
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url} did not become healthy:\n{processes.tail()}")


def metric_samples(url: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    response = httpx.get(f"{url}/metrics", timeout=5)
    assert response.status_code == 200, response.text
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }


def value(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def role_urls(processes: Processes) -> dict[str, str]:
    return {
        "api": processes.api_url,
        "worker": processes.health_urls["worker"],
        "relay": processes.health_urls["relay"],
    }


EXPECTED_CHECKS = {
    "api": {"postgres", "rabbitmq"},
    "worker": {"postgres", "rabbitmq", "s3"},
    "relay": {"postgres", "rabbitmq", "rabbitmq_routing"},
}


def test_readyz_health_and_metrics_of_every_role_as_the_reference_expects(
    production: Processes,
):
    for role, url in role_urls(production).items():
        wait_up(url, production)
        ready = httpx.get(f"{url}/readyz", timeout=10)  # no token: probes are open
        assert ready.status_code == 200, (role, ready.text)
        body = ready.json()
        assert set(body) <= TOP_LEVEL and "tenant_id" not in body, role
        assert body["status"] == "healthy"
        assert body["deployment_mode"] == "local"
        assert body["version"]
        assert set(body["checks"]) == EXPECTED_CHECKS[role], role
        for name, check in body["checks"].items():
            assert check["status"] == "up", (role, name, check)
            assert check["latency_ms"] >= 0 and "error" not in check, (role, name)
        assert "s3" not in body["checks"] or role == "worker"

        health = httpx.get(f"{url}/health", timeout=5)
        assert (health.status_code, health.json()) == (200, {"status": "healthy"}), role

        text = httpx.get(f"{url}/metrics", timeout=5).text
        for family in READYZ_FAMILIES:
            assert f"# HELP {family}" in text, (role, family)
        samples = metric_samples(url)
        for dependency in EXPECTED_CHECKS[role]:
            assert value(samples, "selfprobe_result", dep=dependency) == 1, (role, dependency)
        assert value(samples, "readyz_check_status_total", dep="postgres", status="up") >= 1


def test_readyz_answers_many_probes_at_once(production: Processes):
    """Twenty probes at once (the reference checks fifty against its 3-second kubelet
    timeout): each one is answered healthy, every check within its 2-second deadline."""
    url = production.api_url
    httpx.get(f"{url}/readyz", timeout=10)

    def probe(_: int) -> httpx.Response:
        return httpx.get(f"{url}/readyz", timeout=10)

    with ThreadPoolExecutor(20) as pool:
        answers = list(pool.map(probe, range(20)))
    assert [answer.status_code for answer in answers] == [200] * 20, [
        answer.text for answer in answers if answer.status_code != 200
    ]
    for answer in answers:
        checks = answer.json()["checks"]
        assert all(c["status"] == "up" and c["latency_ms"] < 2000 for c in checks.values())


async def test_each_role_counts_its_work_in_its_own_metrics(
    production: Processes,
    source_database: str,
    events_queue,  # noqa: F811
):
    api, auth = production.api_url, production.headers
    register(api, source_database, "e2e_pg_metrics", auth)
    job_id = submit(api, {"e2e_pg_metrics": {"accounts": ["id"]}}, "metrics", auth)
    deadline = time.monotonic() + 60
    while httpx.get(f"{api}/v1/fetcher/{job_id}", headers=auth).json()["status"] != "completed":
        assert time.monotonic() < deadline, production.tail()
        await asyncio.sleep(0.2)
    urls = role_urls(production)

    assert (
        value(metric_samples(urls["api"]), "fetcher_jobs_requested_total", outcome="created") >= 1
    )
    worker = metric_samples(urls["worker"])
    assert value(worker, "fetcher_jobs_completed_total") >= 1
    assert value(worker, "fetcher_job_duration_seconds_count", outcome="completed") >= 1
    assert value(worker, "fetcher_job_result_rows_sum") >= 10_000
    assert value(worker, "fetcher_job_result_bytes_count") >= 1
    assert value(worker, "fetcher_result_upload_seconds_count") >= 1
    # the relay caught up with the log: the job's completion was emitted (a queue is bound to
    # the events exchange; without one an event is unroutable and the emitter retries it)
    while True:
        relay = metric_samples(urls["relay"])
        lags = [
            value(relay, "fetcher_follower_lag_notifications", follower=name)
            for name in ("dispatcher", "emitter", "projection")
        ]
        present = [
            ("fetcher_follower_lag_notifications", frozenset({("follower", name)})) in relay
            for name in ("dispatcher", "emitter", "projection")
        ]
        if all(present) and lags == [0, 0, 0]:
            break
        assert time.monotonic() < deadline, (lags, present)
        await asyncio.sleep(0.2)


@pytest.fixture
def drained(
    run_id: str, tmp_path_factory: pytest.TempPathFactory, source_database: str
) -> Iterator[Processes]:
    """`fetcher api`, `worker` (one job at a time) and `relay` of their own, with a 3-second
    drain, for tests that stop them."""
    require_listening(S3_ENDPOINT, "the S3 test server")
    require_listening(RABBIT, "RabbitMQ")
    require_listening(PG_ADMIN, "PostgreSQL")
    store_db = f"fetcher_e2e_drain_{run_id}"
    queue = f"fetcher.e2e.{run_id}.drain.queue"
    exchange = f"fetcher.e2e.{run_id}.drain.events"
    asyncio.run(create_database(store_db))
    port = free_port()
    env = base_env(
        APP_ENC_KEY=MASTER_KEY,
        FETCHER_DATABASE_URL=pg_url(store_db),
        FETCHER_DATA_DIR=str(tmp_path_factory.mktemp("drain-data")),
        RABBITMQ_URL=RABBIT,
        RABBITMQ_FETCHER_WORK_QUEUE=queue,
        RABBITMQ_JOB_EVENTS_EXCHANGE=exchange,
        RABBITMQ_NUMBERS_OF_WORKERS="1",
        OBJECT_STORAGE_ENDPOINT=S3_ENDPOINT,
        OBJECT_STORAGE_BUCKET=S3_BUCKET,
        OBJECT_STORAGE_KEY_PREFIX=f"e2e-{run_id}-drain/",
        OBJECT_STORAGE_ACCESS_KEY_ID=S3_ACCESS,
        OBJECT_STORAGE_SECRET_KEY=S3_SECRET,
        OBJECT_STORAGE_USE_PATH_STYLE="true",
        SERVER_ADDRESS=f"127.0.0.1:{port}",
        READYZ_DRAIN_DELAY_SEC=str(DRAIN_SECONDS),
    )
    processes = Processes(
        env=env, logs=tmp_path_factory.mktemp("drain-logs"), api_url=f"http://127.0.0.1:{port}"
    )
    try:
        yield processes
    finally:
        processes.stop()
        asyncio.run(drop_database(store_db))
        asyncio.run(_delete_broker_entities(queue, exchange))


def start_roles(
    processes: Processes, generation: int, roles: tuple[str, ...] = ("api", "worker", "relay")
) -> dict[str, subprocess.Popen[bytes]]:
    started = {role: processes.start(role, f"{role}-{generation}") for role in roles}
    wait_up(processes.api_url, processes)
    for role in set(roles) - {"api"}:
        wait_up(processes.health_urls[f"{role}-{generation}"], processes)
    return started


@pytest.fixture
async def locked_table(source_database: str) -> AsyncIterator[Transaction]:
    """A table that stays locked (its reads wait) until the test rolls the lock back."""
    connection = await asyncpg.connect(pg_url(source_database))
    await connection.execute(
        "CREATE TABLE IF NOT EXISTS drain_rows AS SELECT g AS id FROM generate_series(1, 100) g"
    )
    transaction = connection.transaction()
    await transaction.start()
    await connection.execute("LOCK TABLE drain_rows IN ACCESS EXCLUSIVE MODE")
    try:
        yield transaction
    finally:
        await connection.close()


def status_of(api: str, job_id: str) -> str:
    return str(httpx.get(f"{api}/v1/fetcher/{job_id}", timeout=5).json()["status"])


def until(predicate, timeout: float, message) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, message() if callable(message) else message
        time.sleep(0.05)


def draining_body(url: str) -> dict | None:
    try:
        response = httpx.get(f"{url}/readyz", timeout=2)
    except httpx.HTTPError:
        return None
    return response.json() if response.status_code == 503 else None


def assert_drains_then_exits(
    proc: subprocess.Popen[bytes], url: str, processes: Processes, log_name: str
) -> None:
    """SIGTERM: within 1.5 s readiness answers 503 `draining`; the process exits 0; it logged
    each phase of its shutdown."""
    signalled = time.monotonic()
    proc.terminate()
    seen: list[dict] = []

    def draining() -> bool:
        body = draining_body(url)
        if body is not None:
            seen.append(body)
        return body is not None

    until(draining, 1.5, lambda: f"{url}/readyz never reported draining\n{processes.tail()}")
    assert seen[0] == {
        "status": "unhealthy",
        "checks": DRAINING,
        "version": seen[0]["version"],
        "deployment_mode": "local",
    }
    health = httpx.get(f"{url}/health", timeout=2)
    assert health.status_code == 200  # alive while it drains
    assert proc.wait(timeout=45) == 0, processes.tail()
    assert time.monotonic() - signalled >= DRAIN_SECONDS
    log = (processes.logs / f"{log_name}.log").read_text()
    for phase in (
        "shutdown: SIGTERM received, readiness reports draining for 3s",
        "shutdown: drain over, closing the listener and finishing in-flight work",
        "shutdown: complete",
    ):
        assert phase in log, (phase, log[-3000:])
    assert " ERROR " not in log, log[-3000:]


async def test_sigterm_drains_every_role_and_loses_no_job(
    drained: Processes, source_database: str, locked_table: Transaction
):
    processes = drained
    api = processes.api_url
    first = start_roles(processes, 1)
    register(api, source_database, "drain_pg")
    mapped = {"drain_pg": {"drain_rows": ["id"]}}

    # A job in flight: the worker has claimed it and waits on the locked table.
    in_flight = submit(api, mapped, "in-flight")
    until(lambda: status_of(api, in_flight) == "processing", 30, processes.tail)
    queued = submit(api, mapped, "queued")  # the worker takes one job at a time

    # The worker: readiness drains at once, it takes nothing new, finishes what it runs.
    worker_log = processes.logs / "worker-1.log"
    first["worker"].terminate()
    until(
        lambda: draining_body(processes.health_urls["worker-1"]) is not None,
        1.5,
        processes.tail,
    )
    until(lambda: "takes no new jobs" in worker_log.read_text(), 5, processes.tail)
    await locked_table.rollback()  # the job in flight can now read its rows
    assert first["worker"].wait(timeout=45) == 0, processes.tail()
    assert status_of(api, in_flight) == "completed"
    assert status_of(api, queued) == "pending"  # left in the queue for the next worker
    log = worker_log.read_text()
    for phase in (
        "shutdown: SIGTERM received, readiness reports draining for 3s",
        "shutdown: the worker takes no new jobs and finishes those it runs",
        "shutdown: the worker finished its jobs",
        "shutdown: drain over, closing the listener and finishing in-flight work",
        "shutdown: complete",
    ):
        assert phase in log, (phase, log[-3000:])

    # The API keeps its listener open while it drains: a request still lands.
    first["api"].terminate()
    until(lambda: draining_body(api) is not None, 1.5, processes.tail)
    late = submit(api, mapped, "during-the-drain")
    assert first["api"].wait(timeout=45) == 0, processes.tail()
    assert "shutdown: complete" in (processes.logs / "api-1.log").read_text()

    assert_drains_then_exits(first["relay"], processes.health_urls["relay-1"], processes, "relay-1")

    # Nothing was lost: a new worker finishes every job (the relay had dispatched them all).
    start_roles(processes, 2, ("api", "worker"))
    for job_id in (in_flight, queued, late):
        until(lambda j=job_id: status_of(api, j) == "completed", 60, processes.tail)
