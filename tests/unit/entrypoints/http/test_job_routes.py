"""The job routes on in-memory adapters: a job requested, run and read back over HTTP; every
refusal with its code."""

from __future__ import annotations

from uuid import UUID

import pytest

from adapters.messaging.wire.work import work_order_body
from domain.tenant import SINGLE_TENANT
from tests.support.http import CONNECTION, JOB, PRODUCT, assert_error


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
    await app.run_job(UUID(accepted["jobId"]), tenant=SINGLE_TENANT)
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


RAW_JOB = (
    b'{"dataRequest":{"mappedFields":{"pgsql":{"zeta":["b","a"],"accounts":["id"]}},'
    b'"filters":{"pgsql":{"accounts":{"id":{"lte":[10.0],"in":[],"eq":[1.50,2]}}}}},'
    b'"metadata":{"source":"payments","n":3.0,"big":1e21,"precise":9007199254740993,'
    b'"tiny":0.0000001,"nested":{"z":1,"a":[2.0,"<&>"]}}}'
)
GO_METADATA = (
    '{"big":1e+21,"n":3,"nested":{"a":[2,"\\u003c\\u0026\\u003e"],"z":1},'
    '"precise":9007199254740992,"source":"payments","tiny":1e-7}'
)


async def test_job_reads_back_in_the_go_form_its_messages_carry(client, app):
    """The request is recorded as sent; reading it (now, or a job recorded long ago) gives
    the reference's stored form: Go's numbers, sorted keys, operators in their fixed order,
    empty operators left out. The work message and the events carry the same bytes."""
    app.schemas_unknown_at_submission()
    await client.post("/v1/management/connections", json=CONNECTION, headers=PRODUCT)
    created = await client.post(
        "/v1/fetcher", content=RAW_JOB, headers={"Content-Type": "application/json"}
    )
    assert created.status_code == 202, created.text
    job_id = created.json()["jobId"]

    read = await client.get(f"/v1/fetcher/{job_id}")

    assert read.status_code == 200
    assert f'"metadata":{GO_METADATA},' in read.text
    assert '"mappedFields":{"pgsql":{"accounts":["id"],"zeta":["b","a"]}},' in read.text
    assert '"filters":{"pgsql":{"accounts":{"id":{"eq":[1.5,2],"lte":[10]}}}},' in read.text
    assert list(read.json()) == [
        "id", "metadata", "mappedFields", "filters", "status", "requestHash", "createdAt",
    ]  # fmt: skip
    job = await app.fetcher.api.get_job(UUID(job_id), tenant=SINGLE_TENANT)
    work = work_order_body(job)
    assert work.endswith(f'"metadata":{GO_METADATA}}}'.encode())
    assert b'"filters":{"pgsql":{"accounts":{"id":{"eq":[1.5,2],"lte":[10]}}}},' in work


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
            "unable to parse request body: dataRequest.mappedFields[...]: expected an object, "
            "got a string",
        ),
        (
            {"dataRequest": {"mappedFields": {"pgsql": {"t": ["a"]}}}, "metadata": {"source": "p"}},
            400,
            "FET-1020",
            "No connections configured for the requested datasources: "
            "no connection is named 'pgsql'",
        ),
    ],
)
async def test_a_bad_job_request_is_refused_with_its_code(client, body, status, code, message):
    assert_error(await client.post("/v1/fetcher", json=body), status, code, message)


async def test_malformed_json_bad_ids_and_unknown_paths_are_refused(client):
    response = await client.post(
        "/v1/fetcher", content=b"{nope", headers={"Content-Type": "application/json"}
    )
    assert_error(
        response,
        400,
        "FET-0001",
        "unable to parse request body: invalid JSON at line 1, column 2: "
        "object keys must be strings",
    )
    assert_error(await client.get("/v1/fetcher/not-a-uuid"), 400, "FET-0404", "invalid job id")
    assert_error(
        await client.get("/v1/fetcher/0190b8a0-0000-7000-8000-000000000001"), 404, "FET-1001"
    )
    assert_error(await client.get("/v1/nothing"), 404, "FET-0005", "Cannot GET /v1/nothing")
