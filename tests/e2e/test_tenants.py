"""Multi-tenant mode in the real processes: `fetcher api`, `worker` and `relay` against
PostgreSQL, RabbitMQ and S3, with verified tokens of two tenants. Neither tenant reaches the
other's connections or jobs; each job's event and result carry its tenant."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from collections.abc import AsyncIterator, Iterator

import aio_pika
import httpx
import pytest

from adapters.crypto.sealing import open_result
from adapters.crypto.signing import HmacMessageSigner
from adapters.storage.s3 import S3ResultStorage, S3Settings
from tests.e2e.conftest import (
    FETCHER,
    MASTER_KEY,
    PG_ADMIN,
    RABBIT,
    ROOT,
    S3_ACCESS,
    S3_BUCKET,
    S3_ENDPOINT,
    S3_SECRET,
    SOURCE_ROWS,
    Processes,
    base_env,
    create_database,
    drop_database,
    free_port,
    pg_url,
)
from tests.e2e.test_job_flow import derived_key, next_event, register, submit
from tests.integration.auth_servers import LocalIdentityProvider
from tests.integration.conftest import require_listening

BASE = "/v1/management/connections"


@pytest.fixture(scope="module")
def tenanted(
    run_id: str,
    tmp_path_factory: pytest.TempPathFactory,
    identity_provider: LocalIdentityProvider,
) -> Iterator[Processes]:
    """The three roles in multi-tenant mode, serving tenant-a and tenant-b. The SSRF guard is
    switched off so that the tenants may read the test database on loopback."""
    require_listening(S3_ENDPOINT, "the S3 test server")
    require_listening(RABBIT, "RabbitMQ")
    require_listening(PG_ADMIN, "PostgreSQL")
    store_db = f"fetcher_e2e_mt_{run_id}"
    asyncio.run(create_database(store_db))
    port = free_port()
    env = base_env(
        APP_ENC_KEY=MASTER_KEY,
        FETCHER_DATABASE_URL=pg_url(store_db),
        FETCHER_DATA_DIR=str(tmp_path_factory.mktemp("mt-data")),
        RABBITMQ_URL=RABBIT,
        RABBITMQ_FETCHER_WORK_QUEUE=f"fetcher.e2e-mt.{run_id}.queue",
        RABBITMQ_JOB_EVENTS_EXCHANGE=f"fetcher.e2e-mt.{run_id}.events",
        OBJECT_STORAGE_ENDPOINT=S3_ENDPOINT,
        OBJECT_STORAGE_BUCKET=S3_BUCKET,
        OBJECT_STORAGE_KEY_PREFIX=f"e2e-mt-{run_id}/",
        OBJECT_STORAGE_ACCESS_KEY_ID=S3_ACCESS,
        OBJECT_STORAGE_SECRET_KEY=S3_SECRET,
        OBJECT_STORAGE_USE_PATH_STYLE="true",
        SERVER_ADDRESS=f"127.0.0.1:{port}",
        FETCHER_AUTH_ISSUER=identity_provider.issuer,
        FETCHER_AUTH_AUDIENCE=identity_provider.audience,
        MULTI_TENANT_ENABLED="true",
        MULTI_TENANT_ALLOWED_TENANTS="tenant-a,tenant-b",
        FETCHER_SSRF_GUARD="false",
    )
    processes = Processes(
        env=env, logs=tmp_path_factory.mktemp("mt-logs"), api_url=f"http://127.0.0.1:{port}"
    )
    for role in ("api", "worker", "relay"):
        processes.start(role)
    try:
        processes.wait_healthy(timeout=180)
        yield processes
    finally:
        processes.stop()
        asyncio.run(drop_database(store_db))


def token_of(idp: LocalIdentityProvider, tenant: str | None) -> dict[str, str]:
    token = idp.token(exp=int(time.time()) + 3600, tenantId=tenant)
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
async def events(tenanted: Processes) -> AsyncIterator[aio_pika.abc.AbstractQueue]:
    connection = await aio_pika.connect(RABBIT)
    channel = await connection.channel()
    exchange = await channel.get_exchange(tenanted.env["RABBITMQ_JOB_EVENTS_EXCHANGE"])
    queue = await channel.declare_queue(exclusive=True)
    await queue.bind(exchange, routing_key="job.*")
    yield queue
    await connection.close()


@pytest.fixture
async def storage() -> AsyncIterator[S3ResultStorage]:
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


async def test_two_tenants_share_nothing_and_each_job_carries_its_tenant(
    tenanted: Processes,
    identity_provider: LocalIdentityProvider,
    source_database: str,
    events,
    storage,
):
    api = tenanted.api_url
    as_a, as_b = token_of(identity_provider, "tenant-a"), token_of(identity_provider, "tenant-b")
    register(api, source_database, "shared_name", as_a)
    register(api, source_database, "shared_name", as_b)  # a name is unique per tenant only
    register(api, source_database, "b_only", as_b)
    b_ids = {
        c["configName"]: c["id"] for c in httpx.get(f"{api}{BASE}", headers=as_b).json()["items"]
    }
    listed_a = httpx.get(f"{api}{BASE}", headers=as_a).json()
    assert [c["configName"] for c in listed_a["items"]] == ["shared_name"]
    assert listed_a["items"][0]["id"] != b_ids["shared_name"]

    b_job = submit(api, {"shared_name": {"public.accounts": ["id"]}}, "mt-b", as_b)
    a_job = submit(api, {"shared_name": {"public.accounts": ["*"]}}, "mt-a", as_a)

    theirs = b_ids["b_only"]
    for method, path, body in (
        ("GET", f"{BASE}/{theirs}", None),
        ("PATCH", f"{BASE}/{theirs}", {"port": 1}),
        ("DELETE", f"{BASE}/{theirs}", None),
        ("POST", f"{BASE}/{theirs}/test", None),
        ("GET", f"{BASE}/{theirs}/schema", None),
        ("GET", f"/v1/fetcher/{b_job}", None),
        ("GET", f"/v1/fetcher/{b_job}/events", None),
    ):
        response = httpx.request(method, f"{api}{path}", json=body, headers=as_a, timeout=30)
        assert response.status_code == 404, (method, path, response.text)
        assert response.json()["code"] == "FET-1001"
    unknown = httpx.post(
        f"{api}/v1/fetcher",
        json={
            "dataRequest": {"mappedFields": {"b_only": {"accounts": ["id"]}}},
            "metadata": {"source": "payments"},
        },
        headers=as_a,
    )
    assert unknown.status_code == 400 and unknown.json()["code"] == "FET-1020", unknown.text
    schema = httpx.post(
        f"{api}{BASE}/validate-schema",
        json={"mappedFields": {"b_only": {"accounts": ["id"]}}},
        headers=as_a,
    )
    assert schema.status_code == 400 and schema.json()["code"] == "FET-1062", schema.text

    external = derived_key("external-hmac")
    for job_id, tenant, rows in (
        (b_job, "tenant-b", SOURCE_ROWS),
        (a_job, "tenant-a", SOURCE_ROWS),
    ):
        message = await next_event(events, job_id, tenanted)
        assert message.routing_key == "job.completed", message.body
        headers = dict(message.headers)
        assert headers["ce-tenantid"] == tenant.encode() and headers["X-Tenant-ID"] == tenant
        HmacMessageSigner([external]).verify(
            headers=headers,
            exchange=message.exchange,
            routing_key=message.routing_key,
            body=message.body,
            now=int(time.time()),
            max_age=300,
        )
        result = json.loads(message.body)["result"]
        assert result["path"] == f"{tenant}/external-data/{job_id}.json"
        assert result["rowCount"] == rows
        blob = await storage.read(tenanted.env["OBJECT_STORAGE_KEY_PREFIX"] + result["path"])
        plaintext = open_result(blob, derived_key("storage"), external, result["hmac"])
        assert len(json.loads(plaintext)["shared_name"]["accounts"]) == rows
        owner = as_b if tenant == "tenant-b" else as_a
        job = httpx.get(f"{api}/v1/fetcher/{job_id}", headers=owner).json()
        assert job["status"] == "completed" and job["resultPath"] == result["path"]

    for claim, status, code in ((None, 400, "FET-1080"), ("tenant-c", 404, "FET-1081")):
        refused = httpx.get(f"{api}{BASE}", headers=token_of(identity_provider, claim))
        assert refused.status_code == status and refused.json()["code"] == code, refused.text
    ready = httpx.get(f"{api}/readyz/tenant/tenant-a")
    assert ready.status_code == 200 and ready.json()["tenant_id"] == "tenant-a", ready.text
    missing = httpx.get(f"{api}/readyz/tenant/tenant-c")
    assert missing.status_code == 404
    assert missing.json() == {"error": "tenant not found", "tenant_id": "tenant-c"}


def test_the_api_refuses_multi_tenant_mode_without_token_verification(tmp_path):
    env = base_env(
        FETCHER_DATA_DIR=str(tmp_path / "data"),
        FETCHER_DATABASE_URL=f"sqlite:///{tmp_path / 'fetcher.sqlite3'}",
        RABBITMQ_URL=RABBIT,
        APP_ENC_KEY=MASTER_KEY,
        MULTI_TENANT_ENABLED="true",
        SERVER_ADDRESS=f"127.0.0.1:{free_port()}",
    )
    done = subprocess.run(
        [FETCHER, "api"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith(
        "fetcher: configuration error: MULTI_TENANT_ENABLED=true needs verified tokens"
    )
