"""One job end to end: HTTP in, signed CloudEvent out, sealed result in object storage."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import aio_pika
import asyncpg
import httpx
import pytest

from adapters.crypto.sealing import open_result
from adapters.crypto.signing import HmacMessageSigner
from adapters.storage.s3 import S3ResultStorage, S3Settings
from application.errors import StorageError
from tests.e2e.conftest import (
    FETCHER,
    MASTER_KEY,
    RABBIT,
    S3_ACCESS,
    S3_BUCKET,
    S3_ENDPOINT,
    S3_SECRET,
    SOURCE_ROWS,
    Processes,
    base_env,
    pg_url,
    table_gone_before_the_worker_reads,
)

PRODUCT = "payments"


def derived_key(kind: str) -> bytes:
    """What a consumer does: ask the CLI for one derived key, never keep the master key."""
    out = subprocess.run(
        [FETCHER, "keys", kind],
        env=base_env(APP_ENC_KEY=MASTER_KEY),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return bytes.fromhex(out.rsplit(" ", 1)[1])


def register(
    api: str,
    source_db: str,
    name: str,
    headers: Mapping[str, str] | None = None,
    *,
    port: int = 5432,
) -> None:
    response = httpx.post(
        f"{api}/v1/management/connections",
        headers={"X-Product-Name": PRODUCT, **(headers or {})},
        json={
            "configName": name,
            "type": "POSTGRESQL",
            "host": "127.0.0.1",
            "port": port,
            "databaseName": source_db,
            "userName": "postgres",
            "password": "p@ss w:rd/?#",
        },
    )
    assert response.status_code == 201, response.text
    assert "p@ss" not in response.text


def submit(
    api: str, mapped: dict[str, Any], tag: str, headers: Mapping[str, str] | None = None
) -> str:
    response = httpx.post(
        f"{api}/v1/fetcher",
        json={"dataRequest": {"mappedFields": mapped}, "metadata": {"source": PRODUCT, "tag": tag}},
        headers=headers,
    )
    assert response.status_code == 202, response.text
    return str(response.json()["jobId"])


_OTHERS: dict[tuple[int, str], dict[str, list[Any]]] = {}
"""Events a ``next_event`` call took off a queue for other jobs, kept for the calls that ask for
them (two jobs' events arrive in either order)."""


async def next_event(
    queue: aio_pika.abc.AbstractQueue, job_id: str, processes: Processes, timeout: float = 60.0
):
    others = _OTHERS.setdefault((id(queue), queue.name), {})
    if others.get(job_id):
        return others[job_id].pop(0)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        message = await queue.get(fail=False)
        if message is None:
            await asyncio.sleep(0.1)
            continue
        await message.ack()
        event_job = json.loads(message.body)["jobId"]
        if event_job == job_id:
            return message
        others.setdefault(event_job, []).append(message)
    raise AssertionError(f"no event for job {job_id} within {timeout}s:\n{processes.tail()}")


async def expected_rows(source_db: str) -> list[dict[str, Any]]:
    conn = await asyncpg.connect(pg_url(source_db))
    try:
        rows = await conn.fetch("SELECT * FROM accounts ORDER BY id")
    finally:
        await conn.close()
    return [dict(r) for r in rows]


def same_row(got: dict[str, Any], want: dict[str, Any]) -> bool:
    return (
        got["id"] == want["id"]
        and got["email"] == want["email"]
        and Decimal(got["amount"]) == want["amount"]
        and got["amount"] == str(want["amount"])
        and got["created_at"].endswith("Z")
        and datetime.fromisoformat(got["created_at"]) == want["created_at"].astimezone(UTC)
        and got["active"] is want["active"]
        and got["note"] == want["note"]
        and got["uid"] == str(want["uid"])
    )


@pytest.fixture
async def events_queue(production: Processes):
    connection = await aio_pika.connect(RABBIT)
    channel = await connection.channel()
    exchange = await channel.get_exchange(production.env["RABBITMQ_JOB_EVENTS_EXCHANGE"])
    queue = await channel.declare_queue(exclusive=True)
    await queue.bind(exchange, routing_key="job.*")
    yield queue
    await connection.close()


@pytest.fixture
async def storage():
    s3 = await S3ResultStorage.open(
        S3Settings(
            bucket=S3_BUCKET,
            endpoint_url=S3_ENDPOINT,
            access_key_id=S3_ACCESS,
            secret_access_key=S3_SECRET,
            use_path_style=True,
        )
    )
    yield s3
    await s3.close()


async def test_job_over_ten_thousand_rows_completes_with_verifiable_event_and_result(
    production: Processes, source_database: str, events_queue, storage
):
    api, auth = production.api_url, production.headers
    register(api, source_database, "e2e_pg", auth)
    job_id = submit(api, {"e2e_pg": {"public.accounts": ["*"]}}, "full", auth)

    message = await next_event(events_queue, job_id, production)
    assert message.routing_key == "job.completed"
    headers = {k: v for k, v in message.headers.items()}
    assert headers["ce-id"] == f"fetcher.job.completed.{job_id}".encode()
    assert headers["ce-type"] == b"studio.lerian.job.completed"
    assert headers["ce-source"] == b"//lerian.fetcher/worker"
    assert headers["ce-tenantid"] == b"single-tenant"
    external = derived_key("external-hmac")
    HmacMessageSigner([external]).verify(
        headers=headers,
        exchange=message.exchange,
        routing_key=message.routing_key,
        body=message.body,
        now=int(time.time()),
        max_age=300,
    )
    body = json.loads(message.body)
    assert body["status"] == "completed" and body["metadata"] == {"source": PRODUCT, "tag": "full"}
    result = body["result"]
    assert result["path"] == f"external-data/{job_id}.json"
    assert result["rowCount"] == SOURCE_ROWS

    blob = await storage.read(production.env["OBJECT_STORAGE_KEY_PREFIX"] + result["path"])
    plaintext = open_result(blob, derived_key("storage"), external, result["hmac"])
    assert len(plaintext) == result["sizeBytes"]
    rows = sorted(json.loads(plaintext)["e2e_pg"]["accounts"], key=lambda r: r["id"])
    want = await expected_rows(source_database)
    assert len(rows) == len(want) == SOURCE_ROWS
    mismatches = [(g, w) for g, w in zip(rows, want, strict=True) if not same_row(g, w)]
    assert mismatches == [], mismatches[:2]

    job = httpx.get(f"{api}/v1/fetcher/{job_id}", headers=auth).json()
    assert job["status"] == "completed" and job["resultHmac"] == result["hmac"]
    ready = httpx.get(f"{api}/readyz")
    assert ready.status_code == 200, ready.text
    # As the reference's manager: its database and the broker; storage is the worker's.
    assert set(ready.json()["checks"]) == {"postgres", "rabbitmq"}
    history = httpx.get(f"{api}/v1/fetcher/{job_id}/events", headers=auth).json()["events"]
    assert [e["type"] for e in history] == ["Requested", "Claimed", "ResultStored", "Completed"]


async def test_an_unknown_table_is_refused_at_submission_with_the_closest_name(
    production: Processes, source_database: str
):
    api, auth = production.api_url, production.headers
    register(api, source_database, "e2e_pg_typo", auth)
    job = {
        "dataRequest": {"mappedFields": {"e2e_pg_typo": {"acounts": ["id"]}}},
        "metadata": {"source": PRODUCT},
    }
    response = httpx.post(f"{api}/v1/fetcher", json=job, headers=auth)
    assert response.status_code == 400, response.text
    assert response.json()["code"] == "FET-0401"
    assert "(did you mean 'accounts'?)" in response.json()["message"]


async def test_job_on_missing_table_fails_with_reference_message_and_stores_nothing(
    production: Processes, source_database: str, events_queue, storage
):
    api, auth = production.api_url, production.headers
    register(api, source_database, "e2e_pg_missing", auth)
    async with table_gone_before_the_worker_reads(production, source_database) as table:
        job_id = submit(api, {"e2e_pg_missing": {table: ["id"]}}, "missing", auth)
    message = await next_event(events_queue, job_id, production)
    assert message.routing_key == "job.failed"
    body = json.loads(message.body)
    assert body["status"] == "failed" and "result" not in body
    assert body["metadata"]["error"]["message"].startswith(
        "engine extraction: engine: [validation] extraction request failed schema validation"
    )
    with pytest.raises(StorageError):
        await storage.read(
            production.env["OBJECT_STORAGE_KEY_PREFIX"] + f"external-data/{job_id}.json"
        )
    job = httpx.get(f"{api}/v1/fetcher/{job_id}", headers=auth).json()
    assert job["status"] == "failed" and "resultPath" not in job
    assert job["metadata"]["error"] == body["metadata"]["error"]["message"]


async def _requested_jobs(production: Processes) -> int:
    """How many jobs the event store holds (their ``JobRequested`` events)."""
    conn = await asyncpg.connect(production.env["FETCHER_DATABASE_URL"])
    try:
        count = await conn.fetchval(
            "SELECT count(*) FROM stored_events WHERE topic = 'domain.job:JobRequested'"
        )
    finally:
        await conn.close()
    return int(count)


CONCURRENT_DUPLICATES = 50


async def test_fifty_concurrent_identical_requests_create_one_job(
    production: Processes, source_database: str
):
    api = production.api_url
    register(api, source_database, "e2e_pg_dedup", production.headers)
    payload = {
        "dataRequest": {"mappedFields": {"e2e_pg_dedup": {"accounts": ["id"]}}},
        "metadata": {"source": PRODUCT, "tag": "dedup"},
    }
    before = await _requested_jobs(production)
    limits = httpx.Limits(max_connections=CONCURRENT_DUPLICATES)
    async with httpx.AsyncClient(
        base_url=api, timeout=60, headers=production.headers, limits=limits
    ) as client:
        responses = await asyncio.gather(
            *(client.post("/v1/fetcher", json=payload) for _ in range(CONCURRENT_DUPLICATES))
        )
    assert sorted(r.status_code for r in responses) == [200] * (CONCURRENT_DUPLICATES - 1) + [202]
    assert len({r.json()["jobId"] for r in responses}) == 1
    assert await _requested_jobs(production) == before + 1
