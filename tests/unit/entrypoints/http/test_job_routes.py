"""The HTTP API on in-memory adapters: statuses, codes and bodies."""

from __future__ import annotations

import pytest
from litestar.testing import AsyncTestClient

from adapters.memory.messaging import RecordingWorkQueue
from entrypoints.bootstrap import bootstrap
from entrypoints.http.app import create_app
from entrypoints.roles import Role
from tests.support.http import CONNECTION, JOB, PRODUCT, assert_error
from tests.support.twins import in_memory_settings


async def test_connection_create_read_list_delete(client):
    created = await client.post("/v1/management/connections", json=CONNECTION, headers=PRODUCT)
    assert created.status_code == 201, created.text
    body = created.json()
    assert "password" not in created.text and "very secret" not in created.text
    assert body["productName"] == "payments" and body["configName"] == "pgsql"
    read = await client.get(f"/v1/management/connections/{body['id']}")
    assert read.json() == body
    listing = (await client.get("/v1/management/connections")).json()
    assert listing["total"] == 1 and listing["items"][0]["id"] == body["id"]
    assert (await client.delete(f"/v1/management/connections/{body['id']}")).status_code == 204
    again = await client.delete(f"/v1/management/connections/{body['id']}")
    assert_error(again, 404, "FET-1001")


async def test_connection_requires_product_header(client):
    response = await client.post("/v1/management/connections", json=CONNECTION)
    assert_error(
        response, 400, "FET-0403", "X-Product-Name header is required and must not be empty"
    )


async def test_connection_missing_fields_are_listed(client):
    response = await client.post(
        "/v1/management/connections", json={"configName": "abc"}, headers=PRODUCT
    )
    body = assert_error(response, 400, "FET-0402")
    assert set(body["fields"]) == {"type", "host", "databaseName", "userName", "password"}


async def test_duplicate_config_name_conflicts(client):
    await client.post("/v1/management/connections", json=CONNECTION, headers=PRODUCT)
    again = await client.post("/v1/management/connections", json=CONNECTION, headers=PRODUCT)
    assert_error(again, 409, "FET-1002")


async def test_job_lifecycle_over_http(client, app):
    await client.post("/v1/management/connections", json=CONNECTION, headers=PRODUCT)
    created = await client.post("/v1/fetcher", json=JOB)
    assert created.status_code == 202, created.text
    accepted = created.json()
    assert accepted["status"] == "pending"
    assert accepted["message"] == "Job created and queued for processing"
    duplicate = await client.post("/v1/fetcher", json=JOB)
    assert duplicate.status_code == 200
    assert duplicate.json()["jobId"] == accepted["jobId"]
    assert duplicate.json()["message"] == "Duplicate request detected - returning existing job"
    from uuid import UUID

    await app.run_job(UUID(accepted["jobId"]))
    job = (await client.get(f"/v1/fetcher/{accepted['jobId']}")).json()
    assert job["status"] == "completed"
    assert job["resultPath"] == f"external-data/{accepted['jobId']}.json"
    assert len(job["resultHmac"]) == 64 and len(job["requestHash"]) == 64
    assert list(job) == [
        "id",
        "metadata",
        "mappedFields",
        "status",
        "resultPath",
        "resultHmac",
        "requestHash",
        "createdAt",
        "completedAt",
    ]
    history = (await client.get(f"/v1/fetcher/{accepted['jobId']}/events")).json()
    assert [e["type"] for e in history["events"]] == [
        "Requested",
        "Claimed",
        "ResultStored",
        "Completed",
    ]
    assert [e["version"] for e in history["events"]] == [1, 2, 3, 4]
    assert history["events"][2]["facts"]["hmac"] == job["resultHmac"]
    braced = f"{{{accepted['jobId'].replace('-', '').upper()}}}"
    same = (await client.get(f"/v1/fetcher/{braced}/events")).json()
    assert same["jobId"] == accepted["jobId"]


@pytest.mark.parametrize(
    ("body", "status", "code", "message"),
    [
        ({"dataRequest": {}}, 400, "FET-0402", None),
        (
            {"dataRequest": {"mappedFields": {}}, "metadata": {"source": "p"}},
            400,
            "FET-0401",
            "mappedFields cannot be empty",
        ),
        (
            {"dataRequest": {"mappedFields": {"pgsql": {"t": ["a"]}}}},
            400,
            "FET-0402",
            "metadata is required and must contain 'source' field",
        ),
        (
            {"dataRequest": {"mappedFields": {"pgsql": "nope"}}},
            400,
            "FET-0001",
            "unable to parse request body",
        ),
        (
            {"dataRequest": {"mappedFields": {"pgsql": {"t": ["a"]}}}, "metadata": {"source": "p"}},
            400,
            "FET-1020",
            "No connections configured for the requested datasources",
        ),
    ],
)
async def test_job_request_errors(client, body, status, code, message):
    assert_error(await client.post("/v1/fetcher", json=body), status, code, message)


async def test_malformed_json_and_bad_ids(client):
    response = await client.post(
        "/v1/fetcher", content=b"{nope", headers={"Content-Type": "application/json"}
    )
    assert_error(response, 400, "FET-0001", "unable to parse request body")
    assert_error(await client.get("/v1/fetcher/not-a-uuid"), 400, "FET-0404", "invalid job id")
    assert_error(
        await client.get("/v1/fetcher/0190b8a0-0000-7000-8000-000000000001"), 404, "FET-1001"
    )
    assert_error(await client.get("/v1/nothing"), 404, "FET-0005", "Cannot GET /v1/nothing")


async def test_operational_routes(client):
    assert (await client.get("/health")).json() == {"status": "healthy"}
    ready = await client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["checks"]["event_store"]["status"] == "up"
    assert (await client.get("/version")).json()["version"] == "0.0.0"
    schema = (await client.get("/openapi/openapi.json")).json()
    assert "/v1/fetcher" in schema["paths"]


class UnreachableBroker(RecordingWorkQueue):
    async def check(self) -> None:
        raise ConnectionError("cannot reach amqp://fetcher:hunter2@10.0.0.7:5672/ password=hunter2")


async def test_readyz_does_not_show_credentials_of_a_failing_check(app, tmp_path):
    async with bootstrap(
        in_memory_settings(tmp_path),
        roles={Role.API, Role.RELAY},
        **{**app.overrides(), "work_queue": UnreachableBroker()},
    ) as fetcher:
        async with AsyncTestClient(create_app(fetcher.api)) as test_client:
            ready = await test_client.get("/readyz")
    assert ready.status_code == 503
    assert ready.json()["checks"]["broker"]["status"] == "down"
    assert "hunter2" not in ready.text and "10.0.0.7" not in ready.text


async def test_openapi_documents_the_one_error_shape(client):
    schema = (await client.get("/openapi/openapi.json")).json()
    create = schema["paths"]["/v1/fetcher"]["post"]["responses"]
    assert {"200", "202", "400", "409", "500", "503"} <= set(create)
    ref = create["400"]["content"]["application/json"]["schema"]["$ref"]
    error = schema["components"]["schemas"][ref.rsplit("/", 1)[1]]
    assert set(error["properties"]) == {"code", "title", "message", "fields"}
    assert set(error["required"]) == {"code", "title", "message"}
    validate = schema["paths"]["/v1/management/connections/validate-schema"]["post"]
    assert "422" in validate["responses"]
