"""The claim race for real: two `fetcher worker` processes get the same signed work message at
the same time, against PostgreSQL, RabbitMQ and S3; each job is claimed, stored and ended once."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

import aio_pika
import httpx
import pytest

from adapters.crypto.keys import KeyRing
from adapters.crypto.signing import HmacMessageSigner
from adapters.messaging.rabbitmq import AioPikaWorkQueue
from domain.job import Job, Phase
from domain.request import ExtractionRequest
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
from tests.e2e.test_job_flow import register, submit
from tests.integration.conftest import require_listening

JOBS = 6
WORKERS = ("worker-a", "worker-b")


async def _queue_counts(queue_name: str) -> tuple[int, int]:
    """(ready messages, consumers) of the queue."""
    connection = await aio_pika.connect(RABBIT)
    try:
        channel = await connection.channel()
        queue = await channel.declare_queue(queue_name, passive=True)
        result = queue.declaration_result
        return int(result.message_count), int(result.consumer_count)
    finally:
        await connection.close()


async def _ready_messages(queue_name: str) -> int:
    return (await _queue_counts(queue_name))[0]


async def _until_no_ready_messages(queue_name: str, timeout: float = 30.0) -> None:
    for _ in range(int(timeout * 10)):
        if not await _ready_messages(queue_name):
            return
        await asyncio.sleep(0.1)


async def _delete_broker_entities(queue_name: str, exchange_name: str) -> None:
    connection = await aio_pika.connect(RABBIT)
    try:
        channel = await connection.channel()
        await channel.queue_delete(queue_name)
        await channel.exchange_delete(exchange_name)
    finally:
        await connection.close()


@dataclass
class RacingWorkers:
    processes: Processes
    workers: list[subprocess.Popen[bytes]]


@pytest.fixture
def racing_workers(
    run_id: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RacingWorkers]:
    """`fetcher api` and two `fetcher worker`s, each taking one delivery at a time. No relay:
    the test itself delivers the work messages."""
    require_listening(S3_ENDPOINT, "the S3 test server")
    require_listening(RABBIT, "RabbitMQ")
    require_listening(PG_ADMIN, "PostgreSQL")
    store_db = f"fetcher_e2e_race_{run_id}"
    queue = f"fetcher.e2e.{run_id}.race.queue"
    exchange = f"fetcher.e2e.{run_id}.race.events"
    asyncio.run(create_database(store_db))
    port = free_port()
    env = base_env(
        APP_ENC_KEY=MASTER_KEY,
        FETCHER_DATABASE_URL=pg_url(store_db),
        FETCHER_DATA_DIR=str(tmp_path_factory.mktemp("race-data")),
        RABBITMQ_URL=RABBIT,
        RABBITMQ_FETCHER_WORK_QUEUE=queue,
        RABBITMQ_JOB_EVENTS_EXCHANGE=exchange,
        RABBITMQ_NUMBERS_OF_WORKERS="1",
        OBJECT_STORAGE_ENDPOINT=S3_ENDPOINT,
        OBJECT_STORAGE_BUCKET=S3_BUCKET,
        OBJECT_STORAGE_KEY_PREFIX=f"e2e-{run_id}-race/",
        OBJECT_STORAGE_ACCESS_KEY_ID=S3_ACCESS,
        OBJECT_STORAGE_SECRET_KEY=S3_SECRET,
        OBJECT_STORAGE_USE_PATH_STYLE="true",
        SERVER_ADDRESS=f"127.0.0.1:{port}",
    )
    processes = Processes(
        env=env, logs=tmp_path_factory.mktemp("race-logs"), api_url=f"http://127.0.0.1:{port}"
    )
    processes.start("api")
    workers = [processes.start("worker", name) for name in WORKERS]
    try:
        processes.wait_healthy()
        deadline = time.monotonic() + 30
        while asyncio.run(_queue_counts(queue))[1] < len(WORKERS):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the workers did not start consuming:\n{processes.tail()}")
            time.sleep(0.1)
        yield RacingWorkers(processes, workers)
    finally:
        processes.stop()
        asyncio.run(drop_database(store_db))
        asyncio.run(_delete_broker_entities(queue, exchange))


def _terminal(api: str, job_ids: list[str], processes: Processes, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    pending = set(job_ids)
    while pending and time.monotonic() < deadline:
        for job_id in list(pending):
            if httpx.get(f"{api}/v1/fetcher/{job_id}").json()["status"] in ("completed", "failed"):
                pending.discard(job_id)
        time.sleep(0.1)
    assert not pending, f"jobs not ended within {timeout}s: {pending}\n{processes.tail()}"


async def test_same_work_message_to_two_worker_processes_is_claimed_and_stored_once(
    racing_workers: RacingWorkers, source_database: str
) -> None:
    processes = racing_workers.processes
    api = processes.api_url
    env = processes.env
    register(api, source_database, "race_pg")
    job_ids = [submit(api, {"race_pg": {"accounts": ["id"]}}, f"race-{n}") for n in range(JOBS)]

    # What the dispatcher would publish, signed with the internal key, sent twice in a row:
    # each worker takes one delivery at a time, so the two copies go to the two processes.
    queue = await AioPikaWorkQueue.connect(
        RABBIT,
        env["RABBITMQ_FETCHER_WORK_QUEUE"],
        HmacMessageSigner.from_ring(KeyRing(MASTER_KEY), "internal"),
    )
    try:
        for job_id in job_ids:
            view = httpx.get(f"{api}/v1/fetcher/{job_id}").json()
            job = Job(
                id=UUID(job_id),
                version=1,
                phase=Phase.REQUESTED,
                request=ExtractionRequest.create(
                    {"race_pg": {"accounts": ["id"]}}, None, view["metadata"]
                ),
                created_at=datetime.fromisoformat(view["createdAt"]),
            )
            await queue.publish(job)
            await queue.publish(job)
    finally:
        await queue.close()

    _terminal(api, job_ids, processes)
    await _until_no_ready_messages(env["RABBITMQ_FETCHER_WORK_QUEUE"])
    # SIGTERM drains: a delivery still in flight is settled now, or goes back to the queue.
    processes.stop(racing_workers.workers)
    # Every copy was acknowledged: none went back to the queue as a failure.
    assert await _ready_messages(env["RABBITMQ_FETCHER_WORK_QUEUE"]) == 0, processes.tail()

    for job_id in job_ids:
        history = httpx.get(f"{api}/v1/fetcher/{job_id}/events").json()["events"]
        types = [entry["type"] for entry in history]
        assert types == ["Requested", "Claimed", "ResultStored", "Completed"], (job_id, history)
    for name in WORKERS:
        text = (processes.logs / f"{name}.log").read_text()
        errors = [line for line in text.splitlines() if " ERROR " in line]
        assert errors == [], f"{name}:\n{text[-3000:]}"
