"""A fresh broker, as an operator meets it: `fetcher api`, `fetcher worker` and `fetcher
relay` on a new RabbitMQ virtual host with the work queue but no queue bound for job events.
The job completes; its event cannot be routed, and the relay says so (readiness degraded
with what to bind, the gauge, one log line, not a loop); once the operator binds a queue as
told, the event goes out and the relay is ready again. Then `fetcher check` passes."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from urllib.parse import quote

import aio_pika
import httpx
import pytest

from adapters.messaging.rabbitmq_topology import RabbitTopology
from tests.e2e.conftest import (
    FETCHER,
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
from tests.e2e.test_job_flow import register, submit
from tests.integration.conftest import require_listening

CTL = shutil.which("rabbitmqctl")
pytestmark = pytest.mark.skipif(
    CTL is None, reason="rabbitmqctl is not installed: no fresh virtual host can be made here"
)


def _ctl(*args: str) -> None:
    subprocess.run([str(CTL), *args], check=True, capture_output=True, timeout=60)


@pytest.fixture
def fresh(
    run_id: str, source_database: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Processes]:
    require_listening(S3_ENDPOINT, "the S3 test server")
    require_listening(RABBIT, "RabbitMQ")
    require_listening(PG_ADMIN, "PostgreSQL")
    vhost = f"fetcher-e2e-fresh-{uuid.uuid4().hex[:8]}"
    _ctl("add_vhost", vhost)
    _ctl("set_permissions", "-p", vhost, "guest", ".*", ".*", ".*")
    url = RABBIT.rstrip("/") + "/" + quote(vhost, safe="")
    # provisioned as from definitions, but nobody bound a queue for the events yet
    asyncio.run(RabbitTopology(event_queues=()).apply(url))
    store_db = f"fetcher_e2e_fresh_{run_id}"
    asyncio.run(create_database(store_db))
    port = free_port()
    env = base_env(
        APP_ENC_KEY=MASTER_KEY,
        FETCHER_DATABASE_URL=pg_url(store_db),
        FETCHER_DATA_DIR=str(tmp_path_factory.mktemp("fresh-data")),
        FETCHER_BROKER_DECLARE_TOPOLOGY="false",
        RABBITMQ_URL=url,
        OBJECT_STORAGE_ENDPOINT=S3_ENDPOINT,
        OBJECT_STORAGE_BUCKET=S3_BUCKET,
        OBJECT_STORAGE_KEY_PREFIX=f"e2e-{run_id}-fresh/",
        OBJECT_STORAGE_ACCESS_KEY_ID=S3_ACCESS,
        OBJECT_STORAGE_SECRET_KEY=S3_SECRET,
        OBJECT_STORAGE_USE_PATH_STYLE="true",
        SERVER_ADDRESS=f"127.0.0.1:{port}",
    )
    processes = Processes(
        env=env, logs=tmp_path_factory.mktemp("fresh-logs"), api_url=f"http://127.0.0.1:{port}"
    )
    for role in ("api", "worker", "relay"):
        processes.start(role)
    try:
        processes.wait_healthy()
        register(processes.api_url, source_database, "fresh_pg")
        yield processes
    finally:
        processes.stop()
        asyncio.run(drop_database(store_db))
        subprocess.run([str(CTL), "delete_vhost", vhost], capture_output=True, timeout=60)


def _until(condition: Callable[[], bool], timeout: float, processes: Processes) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"not within {timeout}s:\n{processes.tail()}")


def _routing(relay: str) -> tuple[int, dict[str, str]]:
    response = httpx.get(f"{relay}/readyz", timeout=5)
    return response.status_code, response.json()["checks"].get("rabbitmq_routing", {})


def _held(relay: str) -> float:
    for line in httpx.get(f"{relay}/metrics", timeout=5).text.splitlines():
        if line.startswith('fetcher_unroutable_messages{kind="event"}'):
            return float(line.split()[-1])
    raise AssertionError("no fetcher_unroutable_messages series")


async def _bind_and_take(url: str, job_id: str) -> bytes:
    connection = await aio_pika.connect(url)
    try:
        channel = await connection.channel()
        queue = await channel.declare_queue("consumer.completed", durable=True)
        await queue.bind("fetcher.job.events", routing_key="job.completed")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            message = await queue.get(fail=False, no_ack=True)
            if message is not None and job_id.encode() in message.body:
                return message.body
            await asyncio.sleep(0.2)
        raise AssertionError("the event never arrived once a queue was bound")
    finally:
        await connection.close()


def test_an_event_no_queue_takes_is_reported_then_delivered_once_bound(
    fresh: Processes,
) -> None:
    relay = fresh.health_urls["relay"]
    job_id = submit(fresh.api_url, {"fresh_pg": {"accounts": ["id", "email"]}}, "fresh")

    def completed() -> bool:
        job = httpx.get(f"{fresh.api_url}/v1/fetcher/{job_id}", timeout=5).json()
        return bool(job.get("status") == "completed")

    _until(completed, 90, fresh)
    _until(lambda: _routing(relay)[1].get("status") == "degraded", 30, fresh)
    status, check = _routing(relay)
    assert status == 503
    assert (
        "bind a queue to exchange 'fetcher.job.events' with routing key 'job.completed'"
        in (check["error"])
    )
    assert "FETCHER_BROKER_DECLARE_TOPOLOGY=true" in check["error"]
    assert _held(relay) == 1
    time.sleep(3)  # the relay keeps retrying meanwhile
    told = [
        line
        for line in (fresh.logs / "relay.log").read_text(errors="replace").splitlines()
        if "job.completed" in line and ("WARNING" in line or "warning" in line)
    ]
    assert len(told) == 1, told

    body = asyncio.run(_bind_and_take(fresh.env["RABBITMQ_URL"], job_id))

    assert b'"status":"completed"' in body
    _until(lambda: _routing(relay)[0] == 200, 30, fresh)
    assert _held(relay) == 0
    checked = subprocess.run(
        [FETCHER, "check"], env=fresh.env, capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
