"""A worker SIGKILLed mid-job, for real: `fetcher api`, `fetcher relay` and two `fetcher
worker`s on PostgreSQL, RabbitMQ and S3. The survivor takes the job over within 30 s of the
kill (one lease, 20 s by default), the job completes once, and no incomplete upload remains."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

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
from tests.e2e.test_job_flow import register, submit
from tests.integration.conftest import require_listening
from tests.support.nanio import s3_client
from tests.support.tcp_proxy import proxy_thread

SLOW_BYTES_PER_SECOND = 40_000  # the source's 10,000 rows then take about 30 s to read
TAKEOVER_LIMIT = 30.0


@pytest.fixture
def fleet(
    run_id: str, source_database: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Processes]:
    require_listening(S3_ENDPOINT, "the S3 test server")
    require_listening(RABBIT, "RabbitMQ")
    require_listening(PG_ADMIN, "PostgreSQL")
    store_db = f"fetcher_e2e_takeover_{run_id}"
    queue = f"fetcher.e2e.{run_id}.takeover.queue"
    exchange = f"fetcher.e2e.{run_id}.takeover.events"
    asyncio.run(create_database(store_db))
    port = free_port()
    env = base_env(
        APP_ENC_KEY=MASTER_KEY,
        FETCHER_DATABASE_URL=pg_url(store_db),
        FETCHER_DATA_DIR=str(tmp_path_factory.mktemp("takeover-data")),
        RABBITMQ_URL=RABBIT,
        RABBITMQ_FETCHER_WORK_QUEUE=queue,
        RABBITMQ_JOB_EVENTS_EXCHANGE=exchange,
        OBJECT_STORAGE_ENDPOINT=S3_ENDPOINT,
        OBJECT_STORAGE_BUCKET=S3_BUCKET,
        OBJECT_STORAGE_KEY_PREFIX=f"e2e-{run_id}-takeover/",
        OBJECT_STORAGE_ACCESS_KEY_ID=S3_ACCESS,
        OBJECT_STORAGE_SECRET_KEY=S3_SECRET,
        OBJECT_STORAGE_USE_PATH_STYLE="true",
        SERVER_ADDRESS=f"127.0.0.1:{port}",
        FETCHER_PENDING_TIMEOUT_SECONDS="600",
    )
    processes = Processes(
        env=env, logs=tmp_path_factory.mktemp("takeover-logs"), api_url=f"http://127.0.0.1:{port}"
    )
    processes.start("api")
    processes.start("relay")
    try:
        with proxy_thread("127.0.0.1", 5432, rate=SLOW_BYTES_PER_SECOND) as slow_source:
            processes.wait_healthy()
            register(processes.api_url, source_database, "slow_pg", port=slow_source.port)
            yield processes
    finally:
        processes.stop()
        asyncio.run(_delete_broker_entities(queue, exchange))
        asyncio.run(drop_database(store_db))


def _started(processes: Processes, name: str, job_id: str) -> bool:
    text = (processes.logs / f"{name}.log").read_text(errors="replace")
    return any("job.started" in line and job_id in line for line in text.splitlines())


def _until(condition: Any, timeout: float, processes: Processes) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return time.monotonic()
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout}s:\n{processes.tail()}")


async def _incomplete_uploads(prefix: str) -> list[dict[str, Any]]:
    async with s3_client(S3_ENDPOINT, S3_ACCESS, S3_SECRET) as client:
        listed = await client.list_multipart_uploads(Bucket=S3_BUCKET, Prefix=prefix)
        return list(listed.get("Uploads", []))


def test_a_killed_workers_job_is_taken_over_within_thirty_seconds(fleet: Processes) -> None:
    first = fleet.start("worker", "worker-a")
    time.sleep(2)  # only worker-a consumes when the job is dispatched
    job_id = submit(fleet.api_url, {"slow_pg": {"accounts": ["id", "email", "note"]}}, "takeover")
    _until(lambda: _started(fleet, "worker-a", job_id), 60, fleet)
    fleet.start("worker", "worker-b")
    time.sleep(4)  # worker-b is consuming, worker-a is mid-job
    os.kill(first.pid, signal.SIGKILL)
    killed = time.monotonic()
    first.wait(10)
    taken = _until(lambda: _started(fleet, "worker-b", job_id), 60, fleet)
    takeover = taken - killed
    print(f"takeover after SIGKILL: {takeover:.1f} s")
    assert takeover < TAKEOVER_LIMIT

    def ended() -> bool:
        response = httpx.get(f"{fleet.api_url}/v1/fetcher/{job_id}")
        return response.json().get("status") in ("completed", "failed")

    _until(ended, 120, fleet)
    job = httpx.get(f"{fleet.api_url}/v1/fetcher/{job_id}").json()
    assert job["status"] == "completed", job
    prefix = fleet.env["OBJECT_STORAGE_KEY_PREFIX"]
    assert asyncio.run(_incomplete_uploads(prefix)) == []
