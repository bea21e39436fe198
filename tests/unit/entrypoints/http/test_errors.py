"""One error shape for every failure, the framework's own refusals included, and documented."""

from __future__ import annotations

from entrypoints.http.app import MAX_BODY_BYTES
from tests.support.http import assert_error


async def test_openapi_documents_the_one_error_shape(client):
    schema = (await client.get("/openapi/openapi.json")).json()
    create = schema["paths"]["/v1/fetcher"]["post"]["responses"]
    assert {"200", "202", "400", "409", "500", "503"} <= set(create)
    ref = create["400"]["content"]["application/json"]["schema"]["$ref"]
    error = schema["components"]["schemas"][ref.rsplit("/", 1)[1]]
    assert set(error["properties"]) == {"code", "title", "message", "fields", "entityType"}
    assert set(error["required"]) == {"code", "title", "message"}
    validate = schema["paths"]["/v1/management/connections/validate-schema"]["post"]
    assert "422" in validate["responses"]


async def test_framework_refusals_keep_the_framework_status(client):
    body = assert_error(await client.put("/v1/fetcher"), 405, "FET-0001", "Cannot PUT /v1/fetcher")
    assert body["title"] == "Method Not Allowed"
    too_large = b"{" + b" " * MAX_BODY_BYTES + b"}"
    response = await client.post(
        "/v1/fetcher", content=too_large, headers={"Content-Type": "application/json"}
    )
    assert assert_error(response, 413, "FET-0001")["title"] == "Request Entity Too Large"
