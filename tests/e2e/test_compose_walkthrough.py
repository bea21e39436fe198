"""The compose walk-through run against this machine's servers: the roles started with the
environment deploy/compose.yaml gives them (its service names pointed at the local PostgreSQL,
RabbitMQ and nanio; fresh database, queue and exchange names), the source table made by the
SQL the compose PostgreSQL runs at its first start, then the walk-through's own request files
(deploy/compose/walkthrough/*.json) posted as the documented commands post them. Only what a
container network changes is changed: the connection's host `postgres` becomes 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import aio_pika
import asyncpg
import httpx
import pytest
import yaml

from tests.e2e.conftest import (
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
from tests.integration.conftest import require_listening

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
WALKTHROUGH = DEPLOY / "compose" / "walkthrough"
MASTER_KEY = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="


def source_table_sql() -> str:
    """What the compose PostgreSQL runs in its database `test`, after creating it."""
    return (WALKTHROUGH / "source-db.sql").read_text().split("\\connect test", 1)[1]


def compose_environment(role: str) -> dict[str, str]:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    return {k: str(v) for k, v in compose["services"][role]["environment"].items()}


@pytest.fixture
def walkthrough(tmp_path: Path) -> Iterator[tuple[Processes, str, str]]:
    require_listening(S3_ENDPOINT, "the S3 test server")
    require_listening(RABBIT, "RabbitMQ")
    require_listening(PG_ADMIN, "PostgreSQL")
    run = uuid.uuid4().hex[:10]
    store, source = f"fetcher_walk_store_{run}", f"fetcher_walk_src_{run}"
    asyncio.run(create_database(store))
    asyncio.run(create_database(source))

    async def seed() -> None:
        conn = await asyncpg.connect(pg_url(source))
        try:
            await conn.execute(source_table_sql())
        finally:
            await conn.close()

    asyncio.run(seed())
    local = {  # the compose service names, as this machine serves them
        "APP_ENC_KEY": MASTER_KEY,
        "FETCHER_DATABASE_URL": pg_url(store),
        "RABBITMQ_URL": RABBIT,
        "RABBITMQ_FETCHER_WORK_QUEUE": f"fetcher.walk.{run}.queue",
        "RABBITMQ_JOB_EVENTS_EXCHANGE": f"fetcher.walk.{run}.events",
        "OBJECT_STORAGE_ENDPOINT": S3_ENDPOINT,
        "OBJECT_STORAGE_BUCKET": S3_BUCKET,
        "OBJECT_STORAGE_KEY_PREFIX": f"walk-{run}/",
        "OBJECT_STORAGE_ACCESS_KEY_ID": S3_ACCESS,
        "OBJECT_STORAGE_SECRET_KEY": S3_SECRET,
        "FETCHER_DATA_DIR": str(tmp_path / "data"),
    }
    port = free_port()
    processes = Processes(env={}, logs=tmp_path, api_url=f"http://127.0.0.1:{port}")
    for role in ("api", "worker", "relay"):
        env = {k: v for k, v in compose_environment(role).items() if "${" not in v}
        env.update(local)
        if role == "api":
            env["SERVER_ADDRESS"] = f"127.0.0.1:{port}"
        else:
            env["SERVER_ADDRESS"] = f"127.0.0.1:{free_port()}"
        processes.env = base_env(**env)
        processes.start(role)
    try:
        processes.wait_healthy()
        yield processes, local["RABBITMQ_JOB_EVENTS_EXCHANGE"], source
    finally:
        processes.stop()
        asyncio.run(drop_database(store))
        asyncio.run(drop_database(source))


async def consume_one(exchange: str, act) -> dict[str, object]:
    connection = await aio_pika.connect(RABBIT)
    try:
        channel = await connection.channel()
        events = await channel.declare_exchange(exchange, aio_pika.ExchangeType.TOPIC, durable=True)
        queue = await channel.declare_queue("", exclusive=True)
        await queue.bind(events, routing_key="job.*")
        await asyncio.to_thread(act)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            message = await queue.get(fail=False)
            if message is not None:
                await message.ack()
                return {"routingKey": message.routing_key, "body": json.loads(message.body)}
            await asyncio.sleep(0.2)
        raise AssertionError("no job event")
    finally:
        await connection.close()


def test_the_compose_walkthrough_runs_its_documented_requests(walkthrough):
    processes, exchange, source = walkthrough
    api = processes.api_url
    connection = json.loads((WALKTHROUGH / "connection.json").read_text())
    assert connection["host"] == "postgres"  # as the containers see it; here, this machine
    connection.update(host="127.0.0.1", databaseName=source)
    job = json.loads((WALKTHROUGH / "job.json").read_text())
    submitted: dict[str, httpx.Response] = {}

    def register_and_submit() -> None:
        submitted["connection"] = httpx.post(
            f"{api}/v1/management/connections",
            headers={"X-Product-Name": "payments"},
            json=connection,
        )
        submitted["job"] = httpx.post(f"{api}/v1/fetcher", json=job)

    try:
        event = asyncio.run(consume_one(exchange, register_and_submit))
    except AssertionError as error:
        raise AssertionError(f"{error}: {submitted}\n{processes.tail()}") from None
    assert submitted["connection"].status_code == 201, submitted["connection"].text
    assert submitted["job"].status_code == 202, submitted["job"].text
    job_id = submitted["job"].json()["jobId"]
    assert event["routingKey"] == "job.completed", event
    body = event["body"]
    assert isinstance(body, dict) and body["jobId"] == job_id
    view = httpx.get(f"{api}/v1/fetcher/{job_id}").json()
    assert view["status"] == "completed" and view["resultPath"], view
    again = httpx.post(f"{api}/v1/fetcher", json=job)  # the walk-through: same request → 200
    assert again.status_code == 200 and again.json()["jobId"] == job_id
