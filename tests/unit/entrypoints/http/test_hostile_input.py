"""Hostile input to the running API: each is a clear 4xx in the one error shape, never a 500;
the valid input beside it still passes."""

from __future__ import annotations

import pytest

from tests.support.http import (
    CONNECTION,
    JOB,
    PRODUCT,
    assert_error,
)

BASE = "/v1/management/connections"
JSON = {"Content-Type": "application/json"}
MAPPED = '"dataRequest":{"mappedFields":{"pgsql":{"accounts":["id"]}}}'


def nested(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/fetcher", "[" * 10_000 + "]" * 10_000),
        ("/v1/fetcher", "{" + MAPPED + ',"metadata":{"x":' + nested(5000) + "}}"),
        (BASE, "[" * 10_000 + "]" * 10_000),
        (f"{BASE}/validate-schema", '{"mappedFields":' + nested(5000) + "}"),
    ],
)
async def test_json_nested_beyond_the_decoder_is_a_parse_error(client, path, body):
    response = await client.post(path, content=body.encode(), headers={**JSON, **PRODUCT})
    assert_error(
        response, 400, "FET-0001", "unable to parse request body: the JSON is nested too deeply"
    )


async def test_json_nested_beyond_the_decoder_on_patch(client):
    created = (await client.post(BASE, json=CONNECTION, headers=PRODUCT)).json()
    body = '{"metadata":' + "[" * 10_000 + "]" * 10_000 + "}"
    response = await client.patch(f"{BASE}/{created['id']}", content=body.encode(), headers=JSON)
    assert_error(
        response, 400, "FET-0001", "unable to parse request body: the JSON is nested too deeply"
    )


async def test_job_metadata_nested_too_deeply_is_refused(client):
    # deep enough to pass the JSON decoder, too deep for the request hash's encoder
    await client.post(BASE, json=CONNECTION, headers=PRODUCT)
    body = "{" + MAPPED + ',"metadata":{"source":"payments","x":' + nested(900) + "}}"
    response = await client.post("/v1/fetcher", content=body.encode(), headers=JSON)
    assert_error(response, 400, "FET-0401", "metadata is nested more than 64 levels deep")
    within = "{" + MAPPED + ',"metadata":{"source":"payments","x":' + nested(60) + "}}"
    response = await client.post("/v1/fetcher", content=within.encode(), headers=JSON)
    assert response.status_code == 202, response.text


async def test_job_numbers_beyond_float64_are_refused(client):
    await client.post(BASE, json=CONNECTION, headers=PRODUCT)
    huge = "9" * 400
    body = "{" + MAPPED + ',"metadata":{"source":"payments","n":' + huge + "}}"
    response = await client.post("/v1/fetcher", content=body.encode(), headers=JSON)
    assert_error(
        response,
        400,
        "FET-0401",
        "metadata contains a number outside the 64-bit floating-point range",
    )
    filters = '"filters":{"pgsql":{"accounts":{"id":{"eq":[-' + huge + "]}}}}"
    body = '{"dataRequest":{"mappedFields":{"pgsql":{"accounts":["id"]}},' + filters + "}"
    body += ',"metadata":{"source":"payments"}}'
    response = await client.post("/v1/fetcher", content=body.encode(), headers=JSON)
    assert_error(
        response,
        400,
        "FET-0401",
        "filter on 'pgsql.accounts.id': operator 'eq' got a number outside the 64-bit "
        "floating-point range",
    )
    # the largest integers a float64 holds are still fine
    body = "{" + MAPPED + ',"metadata":{"source":"payments","n":' + str(2**1000) + "}}"
    response = await client.post("/v1/fetcher", content=body.encode(), headers=JSON)
    assert response.status_code == 202, response.text


@pytest.mark.parametrize(
    "params",
    [
        {"endDate": "9999-12-31"},
        {"startDate": "9999-12-31"},
        {"startDate": "9999-12-01", "endDate": "9999-12-31"},
        {"startDate": "0001-01-01", "endDate": "0001-01-01"},
        {"endDate": "0001-01-15"},
        {"startDate": "0001-01-01"},
    ],
)
async def test_list_dates_at_the_calendar_edges(client, params):
    for path in (BASE, f"{BASE}/unassigned"):
        response = await client.get(path, params=params)
        if params.get("endDate") == "0001-01-15" and "startDate" not in params:
            # only an end: the window starts months before today, so it ends before it starts
            assert_error(response, 400, "FET-0409")
            continue
        assert response.status_code == 200, response.text
        assert response.json()["items"] == []


@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({"page": "9223372036854775807"}, "FET-0405"),
        ({"page": "99999999999999999999"}, "FET-0405"),
        ({"page": "1000000001"}, "FET-0405"),
        ({"limit": "\u0661\u0662"}, "FET-0405"),
        ({"page": "\uff11"}, "FET-0405"),
        ({"limit": "1_0"}, "FET-0405"),
        ({"limit": " 5"}, "FET-0405"),
        ({"metadata.a\x00": "v"}, "FET-0405"),
        ({"metadata.a": "v\x00"}, "FET-0405"),
        ({"type": "\x00"}, "FET-0405"),
        ({"limit": "9" * 200}, "FET-0406"),
    ],
)
async def test_list_rejects_hostile_numbers_and_nul(client, params, code):
    assert_error(await client.get(BASE, params=params), 400, code)
    assert_error(await client.get(f"{BASE}/unassigned", params=params), 400, code)


async def test_list_takes_a_signed_or_a_large_page(client):
    await client.post(BASE, json=CONNECTION, headers=PRODUCT)
    body = (await client.get(BASE, params={"page": "+1"})).json()
    assert body["page"] == 1 and body["total"] == 1
    body = (await client.get(BASE, params={"page": "1000000000"})).json()
    assert body["items"] == []


async def test_a_well_formed_job_passes_the_checks_on_hostile_input(client):
    await client.post(BASE, json=CONNECTION, headers=PRODUCT)
    response = await client.post("/v1/fetcher", json=JOB)
    assert response.status_code == 202, response.text


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("databaseName", "db\x00x"),
        ("schema", "s\x00"),
        ("password", "p\x00w"),
        ("metadata", {"k\x00": "v"}),
        ("metadata", {"k": ["v\x00"]}),
    ],
)
async def test_nul_characters_in_a_connection_are_refused_per_field(client, field, value):
    body = {
        "configName": "nul_check",
        "type": "POSTGRESQL",
        "host": "db.local",
        "port": 5432,
        "databaseName": "pgsql",
        "userName": "reader",
        "password": "secret",
        field: value,
    }
    response = await client.post(
        "/v1/management/connections", json=body, headers={"X-Product-Name": "payments"}
    )
    assert response.status_code == 400, response.text
    assert response.json()["code"] == "FET-0001"
    assert response.json()["fields"] == {field: f"{field} must not contain NUL characters"}


async def test_nul_characters_in_a_patch_are_refused(client):
    body = {
        "configName": "nul_patch",
        "type": "POSTGRESQL",
        "host": "db.local",
        "port": 5432,
        "databaseName": "pgsql",
        "userName": "reader",
        "password": "secret",
    }
    created = await client.post(
        "/v1/management/connections", json=body, headers={"X-Product-Name": "payments"}
    )
    assert created.status_code == 201, created.text
    response = await client.patch(
        f"/v1/management/connections/{created.json()['id']}", json={"userName": "u\x00"}
    )
    assert response.status_code == 400, response.text
    assert response.json()["fields"] == {"userName": "userName must not contain NUL characters"}
