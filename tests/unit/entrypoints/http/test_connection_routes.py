"""The connection API over HTTP on in-memory adapters: every status and code."""

from __future__ import annotations

import base64
import json
import ssl
from dataclasses import replace
from uuid import UUID, uuid4

import pytest
from litestar.testing import AsyncTestClient

from adapters.memory.datasource_reader import MemoryTable
from adapters.security.host_guard import NetworkHostGuard
from application.connections.directory import internal_id
from application.errors import (
    ConnectFailure,
    DatasourceError,
    DatasourceUnavailable,
    ForbiddenHost,
)
from domain.tenant import SINGLE_TENANT
from entrypoints.composition import bootstrap
from entrypoints.http.app import create_app
from tests.support.connection_kit import make_kit
from tests.support.http import CONNECTION, assert_error
from tests.support.twins import in_memory_settings

BASE = "/v1/management/connections"
PRODUCT = {"X-Product-Name": " Payments "}
PLAIN_PRODUCT = {"X-Product-Name": "Payments"}
BODY = {
    "configName": "pgsql",
    "type": "POSTGRESQL",
    "host": "db.local",
    "port": 5432,
    "databaseName": "pgsql",
    "userName": "reader",
    "password": "very secret @:/?#",
}
LEDGER_ID = internal_id("ledger")
CONNECT_FAILED = (
    "The adapter failed to connect to the target data source. Check credentials and network access."
)


LEDGER_SETTINGS = {
    "DATASOURCE_LEDGER_CONFIG_NAME": "ledger",
    "DATASOURCE_LEDGER_TYPE": "postgresql",
    "DATASOURCE_LEDGER_HOST": "db.local",
    "DATASOURCE_LEDGER_PORT": "5432",
    "DATASOURCE_LEDGER_DATABASE": "pgsql",
    "DATASOURCE_LEDGER_USER": "ledger",
    "DATASOURCE_LEDGER_PASSWORD": "env",
}


@pytest.fixture
def kit(app):
    return make_kit(app)


@pytest.fixture
async def client(app, kit, tmp_path):
    """The API with the ledger configured as an internal datasource and the SSRF guard on,
    on the kit's scripted reader, schema cache, test limiter and job index."""
    async with bootstrap(
        in_memory_settings(tmp_path, **LEDGER_SETTINGS),
        overrides=replace(
            app.overrides(),
            reader=kit.reader,
            host_guard=NetworkHostGuard(),
            schema_cache=kit.cache,
            test_limiter=kit.limiter,
            job_index=kit.jobs,
        ),
    ) as fetcher:
        async with AsyncTestClient(create_app(fetcher.api)) as test_client:
            yield test_client


async def create(client, **changes):
    response = await client.post(BASE, json={**BODY, **changes}, headers=PRODUCT)
    assert response.status_code == 201, response.text
    return response.json()


# --- create ---------------------------------------------------------------------------------


async def test_create_returns_201_without_secrets(client):
    response = await client.post(
        BASE,
        json={**BODY, "ssl": {"mode": "verify-full", "ca": "CA PEM", "key": "KEY"}},
        headers=PRODUCT,
    )
    assert response.status_code == 201
    body = response.json()
    assert list(body) == [
        "id", "productName", "configName", "type", "host", "port", "databaseName", "userName",
        "ssl", "createdAt", "updatedAt",
    ]  # fmt: skip
    assert body["productName"] == "payments" and body["ssl"] == {"mode": "verify-full"}
    for secret in ("very secret", "CA PEM", "KEY", "password"):
        assert secret not in response.text


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({}, "X-Product-Name header is required and must not be empty"),
        ({"X-Product-Name": "  "}, "X-Product-Name header is required and must not be empty"),
        ({"X-Product-Name": "a" * 101}, "X-Product-Name must not exceed 100 characters"),
        (
            {"X-Product-Name": "pay ments"},
            "X-Product-Name can only contain alphanumeric characters, underscores, and hyphens",
        ),
    ],
)
async def test_create_validates_the_product_header(client, headers, message):
    assert_error(await client.post(BASE, json=BODY, headers=headers), 400, "FET-0403", message)


async def test_create_refuses_bad_bodies_bad_ssl_internal_hosts_and_taken_names(client):
    assert_error(
        await client.post(BASE, json={}, headers=PRODUCT), 400, "FET-0001", "empty request body"
    )
    assert_error(
        await client.post(
            BASE, content=b"[", headers={**PRODUCT, "Content-Type": "application/json"}
        ),
        400,
        "FET-0001",
        "unable to parse request body: invalid JSON at line 1, column 2: "
        "the body ends before the JSON is complete",
    )
    body = assert_error(
        await client.post(BASE, json={**BODY, "ssl": {"mode": "true"}}, headers=PRODUCT),
        400,
        "FET-0001",
    )
    assert body["fields"]["ssl.mode"].startswith("FET-0413 - Invalid SSL mode.")
    body = assert_error(
        await client.post(BASE, json={**BODY, "ssl": {"ca": "x"}}, headers=PRODUCT), 400, "FET-0402"
    )
    assert body["fields"] == {"ssl.mode": "SSL mode is required"}
    assert_error(
        await client.post(BASE, json={**BODY, "host": "169.254.169.254"}, headers=PRODUCT),
        400,
        "FET-0414",
        "Host is not a valid external database endpoint",
    )
    await create(client)
    assert_error(await client.post(BASE, json=BODY, headers=PRODUCT), 409, "FET-1002")


@pytest.mark.parametrize(
    "host",
    [
        "::ffff:0:7f00:1",
        "64:ff9b:1::7f00:1",
        "2002:7f00:1::1",
        "2001:0:4136:e378:8000:63bf:80ff:fffe",
    ],
)
async def test_ipv6_forms_of_a_blocked_ipv4_host_are_refused_when_written(client, host):
    assert_error(
        await client.post(BASE, json={**BODY, "host": host}, headers=PRODUCT), 400, "FET-0414"
    )
    created = await create(client)
    path = f"{BASE}/{created['id']}"
    assert_error(await client.patch(path, json={"host": host}), 400, "FET-0414")


# --- read and list --------------------------------------------------------------------------


async def test_read_a_stored_and_an_internal_connection(client):
    created = await create(client)
    assert (await client.get(f"{BASE}/{created['id']}")).json() == created
    ledger = (await client.get(f"{BASE}/{LEDGER_ID}")).json()
    assert ledger["configName"] == "ledger" and "productName" not in ledger
    assert ledger["createdAt"] == "0001-01-01T00:00:00Z"
    assert_error(await client.get(f"{BASE}/nope"), 400, "FET-0404", "invalid connection id")
    assert_error(await client.get(f"{BASE}/{uuid4()}"), 404, "FET-1001")


async def test_list_envelope_with_internal_datasources_first(client):
    await create(client)
    await create(client, configName="other", metadata={"team": "risk"})
    body = (await client.get(BASE, params={"limit": 1})).json()
    assert [i["configName"] for i in body["items"]] == ["ledger", "other"]
    assert (body["page"], body["limit"], body["total"]) == (1, 1, 3)
    page2 = (await client.get(BASE, params={"limit": 1, "page": 2})).json()
    assert [i["configName"] for i in page2["items"]] == ["pgsql"] and page2["total"] == 2
    filtered = (
        await client.get(BASE, params={"metadata.team": "risk", "type": "postgresql"})
    ).json()
    assert [i["configName"] for i in filtered["items"]] == ["ledger", "other"]
    by_product = await client.get(BASE, headers={"X-Product-Name": "billing"})
    assert [i["configName"] for i in by_product.json()["items"]] == ["ledger"]
    assert (await client.get(BASE, params={"type": "MONGODB"})).json()["total"] == 0


@pytest.mark.parametrize(
    ("params", "status", "code"),
    [
        ({"limit": "ten"}, 400, "FET-0405"),
        ({"limit": "0"}, 400, "FET-0405"),
        ({"page": "0"}, 400, "FET-0405"),
        ({"$where": "1"}, 400, "FET-0405"),
        ({"_id": "1"}, 400, "FET-0405"),
        ({"k" * 65: "1"}, 400, "FET-0405"),
        ({"note": "v" * 257}, 400, "FET-0405"),
        ({"cursor": "not base64!"}, 400, "FET-0405"),
        ({"limit": "101"}, 400, "FET-0406"),
        ({"sortOrder": "up"}, 400, "FET-0407"),
        ({"startDate": "2026-13-01"}, 400, "FET-0408"),
        ({"endDate": "29/11/2026"}, 400, "FET-0408"),
        ({"startDate": "2026-11-20", "endDate": "2026-11-10"}, 400, "FET-0409"),
    ],
)
async def test_list_rejects_bad_query_parameters(client, params, status, code):
    assert_error(await client.get(BASE, params=params), status, code)
    assert_error(await client.get(f"{BASE}/unassigned", params=params), status, code)


def _query_message(name: str) -> str:
    return (
        "One or more query parameters are in an incorrect format. Please check the following "
        f"parameters '{name}' and ensure they meet the required format before trying again."
    )


async def test_list_takes_at_most_twenty_metadata_filters(client):
    await create(client, metadata={f"k{i}": "v" for i in range(25)})
    twenty = [(f"metadata.k{i}", "v") for i in range(20)]
    for path in (BASE, f"{BASE}/unassigned"):
        assert (await client.get(path, params=twenty)).status_code == 200
        # the same key twice is one filter
        assert (await client.get(path, params=[*twenty, ("metadata.k0", "v")])).status_code == 200
    listed = (await client.get(BASE, params=twenty)).json()
    assert [i["configName"] for i in listed["items"]] == ["ledger", "pgsql"]
    one_off = [*twenty[:19], ("metadata.k19", "w")]
    listed = (await client.get(BASE, params=one_off)).json()
    assert [i["configName"] for i in listed["items"]] == ["ledger"]
    message = _query_message("metadata.<key> (at most 20 filters)")
    for path in (BASE, f"{BASE}/unassigned"):
        too_many = await client.get(path, params=[*twenty, ("metadata.k20", "v")])
        assert_error(too_many, 400, "FET-0405", message)
        probe = await client.get(path, params=[(f"metadata.k{i}", "v") for i in range(1000)])
        assert_error(probe, 400, "FET-0405", _query_message("query string (at most 50 parameters)"))


async def test_list_takes_at_most_fifty_query_parameters(client):
    fifty = [("note", "") for _ in range(45)] + [("limit", "5"), ("page", "1"), ("type", "x")]
    fifty += [("sortOrder", "asc"), ("host", "ignored")]
    assert (await client.get(BASE, params=fifty)).status_code == 200
    message = _query_message("query string (at most 50 parameters)")
    for path in (BASE, f"{BASE}/unassigned"):
        assert_error(await client.get(path, params=[*fifty, ("x", "")]), 400, "FET-0405", message)


async def test_list_accepts_valid_cursor_sort_and_dates(client):
    await create(client)
    cursor = base64.b64encode(json.dumps({"id": "x", "points_next": True}).encode()).decode()
    params = {
        "cursor": cursor, "sortOrder": "ASC", "startDate": "2026-11-29", "endDate": "2026-11-29",
        "limit": "", "host": "ignored",
    }  # fmt: skip
    body = (await client.get(BASE, params=params)).json()
    assert [i["configName"] for i in body["items"]] == ["ledger", "pgsql"]
    assert_error(await client.get(BASE, headers={"X-Product-Name": " "}), 400, "FET-0403")
    message = (
        "The pagination limit exceeds the maximum allowed of 100 items per page. "
        "Please verify the limit and try again."
    )
    assert_error(await client.get(BASE, params={"limit": 500}), 400, "FET-0406", message)


async def test_an_unassigned_connection_is_listed_until_a_product_takes_it(client, app):
    created = await create(client)
    stored = await app.repository.get(UUID(created["id"]), tenant=SINGLE_TENANT)
    legacy = replace(stored, id=uuid4(), config_name="legacy", product_name="")
    await app.repository.add(legacy)
    listed = (await client.get(f"{BASE}/unassigned", headers=PRODUCT)).json()
    assert [i["configName"] for i in listed["items"]] == ["legacy"] and listed["total"] == 1
    path = f"{BASE}/{legacy.id}/assign"
    assert_error(await client.post(path), 400, "FET-0403")
    assigned = await client.post(path, headers={"X-Product-Name": "Billing"})
    assert assigned.status_code == 200 and assigned.json()["productName"] == "billing"
    assert_error(await client.post(path, headers=PRODUCT), 409, "FET-1015")
    assert_error(await client.post(f"{BASE}/{uuid4()}/assign", headers=PRODUCT), 404, "FET-1001")
    assert_error(await client.post(f"{BASE}/x/assign", headers=PRODUCT), 400, "FET-0404")
    assert (await client.get(f"{BASE}/unassigned")).json()["total"] == 0


TYPES = "[ORACLE SQL_SERVER POSTGRESQL MONGODB MYSQL]"


@pytest.mark.parametrize(
    ("raw_port", "problem"),
    [
        (b'"5432"', 'expected an integer, got "5432"'),
        (b"5432.0", "expected an integer, got 5432.0"),
        (b"5.432e3", "expected an integer, got 5432.0"),
        (b'"null"', 'expected an integer, got "null"'),
        (b"true", "expected an integer or null, got true"),
        (b"[5432]", "expected an integer or null, got an array"),
    ],
)
async def test_create_refuses_a_port_go_cannot_decode_into_an_int(client, raw_port, problem):
    """The reference's FET-0001 "unable to parse request body", and then where and what."""
    body = json.dumps({**BODY, "port": 1}).encode().replace(b'"port": 1', b'"port": ' + raw_port)
    response = await client.post(
        BASE, content=body, headers={**PRODUCT, "Content-Type": "application/json"}
    )
    error = assert_error(
        response, 400, "FET-0001", f"unable to parse request body: port: {problem}"
    )
    assert error["title"] == "Invalid payload" and error["fields"] == {"port": problem}


async def test_create_request_rules_name_fields_as_sent_without_an_entity(client):
    lower = assert_error(
        await client.post(BASE, json={**BODY, "type": "postgresql"}, headers=PRODUCT),
        400,
        "FET-0001",
    )
    assert lower["fields"] == {"type": f"type must be one of {TYPES}"}
    assert lower["title"] == "Bad Request" and "entityType" not in lower
    no_port = {k: v for k, v in BODY.items() if k != "port"}
    missing = assert_error(await client.post(BASE, json=no_port, headers=PRODUCT), 400, "FET-0402")
    assert missing["fields"] == {"port": "port is a required field"}
    assert missing["title"] == "Missing Fields in Request" and "entityType" not in missing
    zero = assert_error(
        await client.post(BASE, json={**BODY, "port": 0}, headers=PRODUCT), 400, "FET-0402"
    )
    assert zero["fields"] == {"port": "port is a required field"}


@pytest.mark.parametrize(
    ("name", "code", "message"),
    [
        ("ab", "FET-0001", "config name must be between 3 and 100 characters"),
        ("a" * 101, "FET-0001", "config name must be between 3 and 100 characters"),
        (
            "bad name",
            "FET-0402",
            "config name can only contain alphanumeric characters, underscores, and hyphens",
        ),
        ("   ", "FET-0402", "config name is required"),
    ],
)
async def test_create_model_rules_name_fields_as_stored_with_the_entity(
    client, name, code, message
):
    error = assert_error(
        await client.post(BASE, json={**BODY, "configName": name}, headers=PRODUCT), 400, code
    )
    assert error["fields"] == {"config_name": message}
    assert error["entityType"] == "connection"


async def test_create_accepts_the_reference_boundaries(client):
    await create(client, configName="abc", port=1)
    await create(client, configName="a" * 100, port=65535)


# --- patch and delete -----------------------------------------------------------------------


async def test_patch_changes_the_given_fields_and_refuses_what_create_refuses(client):
    created = await create(client, ssl={"mode": "verify-full", "ca": "CA"})
    path = f"{BASE}/{created['id']}"
    changed = await client.patch(path, json={"port": 6543, "ssl": {"mode": "require"}})
    assert changed.status_code == 200, changed.text
    body = changed.json()
    assert body["port"] == 6543 and body["ssl"] == {"mode": "require"}
    assert body["createdAt"] == created["createdAt"]
    assert_error(await client.patch(path, json={}), 400, "FET-0001", "empty request body")
    assert_error(await client.patch(path, json={"ssl": {}}), 400, "FET-0001", "empty request body")
    assert_error(await client.patch(path, json={"host": "127.0.0.1"}), 400, "FET-0414")
    short = assert_error(await client.patch(path, json={"configName": "x"}), 400, "FET-0001")
    assert short["fields"] == {"configName": "configName must be at least 3 characters in length"}
    assert "entityType" not in short
    assert_error(
        await client.patch(
            path, content=b'{"port":"6543"}', headers={"Content-Type": "application/json"}
        ),
        400,
        "FET-0001",
        'unable to parse request body: port: expected an integer, got "6543"',
    )
    lower = assert_error(await client.patch(path, json={"type": "mysql"}), 400, "FET-0001")
    assert lower["fields"] == {"type": f"type must be one of {TYPES}"}
    zero = assert_error(await client.patch(path, json={"port": 0}), 400, "FET-0402")
    assert zero["fields"] == {"port": "port must be a positive integer"}
    assert zero["entityType"] == "connection"
    assert_error(await client.patch(f"{BASE}/x", json={"port": 1}), 400, "FET-0404")
    assert_error(await client.patch(f"{BASE}/{uuid4()}", json={"port": 1}), 404, "FET-1001")
    assert_error(await client.patch(f"{BASE}/{LEDGER_ID}", json={"port": 1}), 404, "FET-1001")
    await create(client, configName="taken")
    conflict = assert_error(await client.patch(path, json={"configName": "taken"}), 409, "FET-1002")
    assert conflict["fields"] == {"configName": "'taken' is already used by another connection"}


async def test_delete_answers_204_then_404_and_never_deletes_an_internal_datasource(client):
    created = await create(client)
    path = f"{BASE}/{created['id']}"
    deleted = await client.delete(path)
    assert deleted.status_code == 204 and deleted.content == b""
    assert_error(await client.delete(path), 404, "FET-1001")
    assert_error(await client.delete(f"{BASE}/{LEDGER_ID}"), 404, "FET-1001")
    assert_error(await client.delete(f"{BASE}/nope"), 400, "FET-0404")


async def test_patch_and_delete_wait_for_active_jobs(client, app, kit):
    created = await create(client)
    job = {"dataRequest": {"mappedFields": {"pgsql": {"accounts": ["id"]}}}}
    response = await client.post("/v1/fetcher", json={**job, "metadata": {"source": "Payments"}})
    assert response.status_code == 202, response.text  # source matches after normalisation
    await kit.project_jobs()
    path = f"{BASE}/{created['id']}"
    message = "cannot update connection with active jobs"
    assert_error(await client.patch(path, json={"port": 1}), 409, "FET-1021", message)
    message = "cannot delete connection with active jobs"
    assert_error(await client.delete(path), 409, "FET-1021", message)


# --- test, schema, validate-schema ----------------------------------------------------------


async def test_connection_test_reports_latency_failures_and_its_rate_limit(client, kit):
    created = await create(client)
    path = f"{BASE}/{created['id']}/test"
    response = await client.post(path)
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "success" and body["message"] == "Connection successful"
    assert isinstance(body["latencyMs"], int)
    assert (await client.post(f"{BASE}/{LEDGER_ID}/test")).status_code == 200
    assert_error(await client.post(f"{BASE}/nope/test"), 400, "FET-0404")
    assert_error(await client.post(f"{BASE}/{uuid4()}/test"), 404, "FET-1001")
    kit.reader.errors["test"] = ForbiddenHost()
    assert_error(await client.post(path), 400, "FET-0414")
    kit.reader.errors["test"] = DatasourceUnavailable("failed to connect to datasource")
    body = assert_error(await client.post(path), 502, "FET-1041", CONNECT_FAILED)
    assert body["title"] == "Database Connection Error"
    for _ in range(7):
        await client.post(path)
    body = assert_error(
        await client.post(path),
        429,
        "FET-1043",
        "Connection test limit reached. Try again in 6 seconds.",
    )
    assert body["title"] == "Rate Limit Exceeded"


async def test_connection_test_names_a_tls_failure(client, kit):
    created = await create(client)
    error = DatasourceUnavailable(
        "failed to connect to datasource", reason=ConnectFailure.CERTIFICATE_NOT_VERIFIED
    )
    error.__cause__ = ssl.SSLCertVerificationError(1, "certificate verify failed")
    kit.reader.errors["test"] = error
    body = assert_error(await client.post(f"{BASE}/{created['id']}/test"), 502, "FET-1041")
    assert (
        body["message"] == CONNECT_FAILED + " Cause: the server certificate could not be verified."
    )


async def test_schema_lists_tables_with_sorted_columns_and_names_its_failures(client, app, kit):
    created = await create(client)
    app.reader.database("db.local", "pgsql").tables["sales.orders"] = MemoryTable(
        columns=[("total", "numeric"), ("id", "bigint")]
    )
    response = await client.get(f"{BASE}/{created['id']}/schema")
    assert response.status_code == 200
    body = response.json()
    assert (body["id"], body["configName"], body["databaseName"], body["type"]) == (
        created["id"], "pgsql", "pgsql", "POSTGRESQL",
    )  # fmt: skip
    assert [t["name"] for t in body["tables"]] == ["accounts", "empty", "sales.orders"]
    assert body["tables"][2] == {
        "name": "sales.orders",
        "fields": ["id", "total"],
        "columns": [{"name": "id", "type": "bigint"}, {"name": "total", "type": "numeric"}],
    }
    assert (await client.get(f"{BASE}/{LEDGER_ID}/schema")).status_code == 200
    assert_error(await client.get(f"{BASE}/{uuid4()}/schema"), 404, "FET-1001")
    kit.reader.errors["discover"] = DatasourceUnavailable("failed to connect to datasource")
    assert_error(await client.get(f"{BASE}/{created['id']}/schema"), 502, "FET-1041")
    kit.reader.errors["discover"] = DatasourceError("boom", stage="discover")
    body = assert_error(
        await client.get(f"{BASE}/{created['id']}/schema"),
        500,
        "FET-1042",
        "Failed to retrieve database schema information.",
    )
    assert body["title"] == "Schema Retrieval Error"


async def test_validate_schema_answers_200_or_422_with_the_issues_in_order(client, app):
    await create(client)
    await create(client, configName="down", host="down.local")
    path = f"{BASE}/validate-schema"
    ok = await client.post(path, json={"mappedFields": {"pgsql": {"public.accounts": ["*"]}}})
    assert ok.status_code == 200
    assert ok.json() == {
        "status": "success",
        "message": "Schema validated successfully. All datasources, tables, and fields exist.",
    }
    request = {
        "mappedFields": {
            "zz": {"t": ["a"]},
            "pgsql": {"accounts": ["nope", "id"], "ghost": ["id"]},
            "down": {"t": ["a"]},
        }
    }
    failed = await client.post(path, json=request)
    assert failed.status_code == 422
    assert failed.json() == {
        "title": "Schema validation failed",
        "code": "FET-1060",
        "message": "Schema validation found inconsistencies.",
        "errors": [
            {"type": "DATA_SOURCE_DOWN", "dataSourceId": "down"},
            {
                "type": "FIELD_NOT_FOUND",
                "dataSourceId": "pgsql",
                "table": "accounts",
                "field": "nope",
            },
            {"type": "TABLE_NOT_FOUND", "dataSourceId": "pgsql", "table": "ghost"},
            {"type": "DATA_SOURCE_NOT_FOUND", "dataSourceId": "zz"},
        ],
    }
    assert list(failed.json()) == ["title", "code", "message", "errors"]
    assert_error(await client.post(path, json={}), 400, "FET-0402")
    assert_error(await client.post(path, json={"mappedFields": {}}), 400, "FET-0401")
    many = {"mappedFields": {f"d{i}": {"t": ["a"]} for i in range(11)}}
    assert_error(await client.post(path, json=many), 400, "FET-1061")
    nothing = {"mappedFields": {"ghost": {"t": ["a"]}}}
    assert_error(await client.post(path, json=nothing), 400, "FET-1062")
    assert_error(await client.post(path, json={"mappedFields": {"a": "b"}}), 400, "FET-0001")


async def test_connection_metadata_reads_back_in_go_form(client):
    body = json.dumps({**BODY, "metadata": {"z": 1}}).encode()
    body = body.replace(b'{"z": 1}', b'{"z":3.0,"big":1e21,"a":{"y":9007199254740993}}')
    created = await client.post(
        BASE, content=body, headers={**PRODUCT, "Content-Type": "application/json"}
    )
    assert created.status_code == 201, created.text
    expected = '"metadata":{"a":{"y":9007199254740992},"big":1e+21,"z":3}'
    assert expected in created.text
    assert expected in (await client.get(f"{BASE}/{created.json()['id']}")).text


async def test_connection_metadata_refuses_numbers_go_cannot_hold_and_deep_nesting(client):
    huge = json.dumps({**BODY, "metadata": {"n": 10**400}}).encode()
    number = assert_error(
        await client.post(
            BASE, content=huge, headers={**PRODUCT, "Content-Type": "application/json"}
        ),
        400,
        "FET-0001",
    )
    assert number["fields"] == {
        "metadata": "metadata contains a number outside the 64-bit floating-point range"
    }
    deep: dict = {}
    for _ in range(70):
        deep = {"d": deep}
    nested = assert_error(
        await client.post(BASE, json={**BODY, "metadata": deep}, headers=PRODUCT), 400, "FET-0001"
    )
    assert nested["fields"] == {"metadata": "metadata is nested more than 64 levels deep"}


class TestThePlainService:
    """The connection routes of the service as ``app`` wires it: no internal datasource, no
    SSRF guard."""

    @pytest.fixture
    async def client(self, app):
        async with AsyncTestClient(create_app(app.fetcher.api)) as test_client:
            yield test_client

    async def test_connection_create_read_list_delete(self, client):
        created = await client.post(
            "/v1/management/connections", json=CONNECTION, headers=PLAIN_PRODUCT
        )
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

    async def test_connection_requires_product_header(self, client):
        response = await client.post("/v1/management/connections", json=CONNECTION)
        assert_error(
            response, 400, "FET-0403", "X-Product-Name header is required and must not be empty"
        )

    async def test_connection_missing_fields_are_listed(self, client):
        response = await client.post(
            "/v1/management/connections", json={"configName": "abc"}, headers=PLAIN_PRODUCT
        )
        body = assert_error(response, 400, "FET-0402")
        assert body["fields"] == {
            name: f"{name} is a required field"
            for name in ("type", "host", "port", "databaseName", "userName", "password")
        }
        assert "entityType" not in body

    async def test_duplicate_config_name_conflicts(self, client):
        await client.post("/v1/management/connections", json=CONNECTION, headers=PLAIN_PRODUCT)
        again = await client.post(
            "/v1/management/connections", json=CONNECTION, headers=PLAIN_PRODUCT
        )
        assert_error(again, 409, "FET-1002")
