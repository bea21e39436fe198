"""The OpenAPI document is complete enough to generate a correct client: headers, list
parameters, required body fields, the one error shape, the security scheme."""

from __future__ import annotations

import pytest
from litestar.testing import AsyncTestClient

from entrypoints.http.app import create_app

LIST_PARAMETERS = {"limit", "page", "sortOrder", "type", "startDate", "endDate", "cursor"}


@pytest.fixture
async def document(app):
    async with AsyncTestClient(create_app(app.fetcher.api)) as client:
        response = await client.get("/openapi/openapi.json")
        assert response.status_code == 200
        return response.json()


def parameters(operation: dict) -> dict[tuple[str, str], dict]:
    return {(p["in"], p["name"]): p for p in operation.get("parameters", [])}


def body_schema(document: dict, operation: dict) -> dict:
    ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    return document["components"]["schemas"][ref.rsplit("/", 1)[1]]


async def test_the_product_header_is_documented_where_it_is_read(document):
    connections = document["paths"]["/v1/management/connections"]
    assign = document["paths"]["/v1/management/connections/{connection_id}/assign"]["post"]
    for operation, required in (
        (connections["post"], True),
        (assign, True),
        (connections["get"], False),
    ):
        header = parameters(operation)[("header", "X-Product-Name")]
        assert header["required"] is required
        assert header["schema"]["pattern"] == "^[a-zA-Z0-9_-]+$"
        assert header["schema"]["maxLength"] == 100


@pytest.mark.parametrize(
    "path", ["/v1/management/connections", "/v1/management/connections/unassigned"]
)
async def test_every_list_query_parameter_is_documented(document, path):
    operation = document["paths"][path]["get"]
    documented = {name for place, name in parameters(operation) if place == "query"}
    assert documented == LIST_PARAMETERS
    query = parameters(operation)
    assert query[("query", "sortOrder")]["schema"]["enum"] == ["asc", "desc"]
    assert query[("query", "limit")]["schema"]["type"] == "integer"
    assert query[("query", "startDate")]["schema"]["format"] == "date"
    assert "metadata.<key>" in operation["description"]


@pytest.mark.parametrize(
    ("path", "method", "required"),
    [
        (
            "/v1/management/connections",
            "post",
            ["configName", "databaseName", "host", "password", "type", "userName"],
        ),
        ("/v1/fetcher", "post", ["dataRequest", "metadata"]),
        ("/v1/management/connections/validate-schema", "post", ["mappedFields"]),
        ("/v1/management/connections/{connection_id}", "patch", []),
    ],
)
async def test_required_request_fields_are_marked_and_not_nullable(
    document, path, method, required
):
    schema = body_schema(document, document["paths"][path][method])
    assert schema.get("required", []) == required
    for name in required:
        assert "oneOf" not in schema["properties"][name], name  # no "or null"


async def test_the_job_request_requires_mapped_fields(document):
    data_request = document["components"]["schemas"]["DataRequest"]
    assert data_request["required"] == ["mappedFields"]
    assert "source" in document["components"]["schemas"]["FetcherRequest"]["description"]


async def test_every_error_answer_has_the_one_error_shape(document):
    error_ref = "#/components/schemas/ErrorBody"
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            for status, response in operation["responses"].items():
                if status.startswith("2") or (path.endswith("validate-schema") and status == "422"):
                    continue
                if path.startswith("/readyz/"):  # the reference's own probe bodies (§7.3)
                    continue
                schema = response["content"]["application/json"]["schema"]
                assert schema == {"$ref": error_ref}, (method, path, status)
    assert set(document["components"]["schemas"]["ErrorBody"]["required"]) == {
        "code",
        "title",
        "message",
    }


async def test_body_routes_document_the_size_limit(document):
    for path, method in (
        ("/v1/fetcher", "post"),
        ("/v1/management/connections", "post"),
        ("/v1/management/connections/{connection_id}", "patch"),
        ("/v1/management/connections/validate-schema", "post"),
    ):
        assert "413" in document["paths"][path][method]["responses"], (method, path)


async def test_the_ui_and_its_assets_are_served_by_the_service(app):
    async with AsyncTestClient(create_app(app.fetcher.api)) as client:
        for path in ("/openapi", "/openapi/swagger"):
            page = await client.get(path)
            assert page.status_code == 200 and "SwaggerUIBundle" in page.text, path
            assert "cdn" not in page.text.lower() and "https://" not in page.text
        script = await client.get("/openapi/assets/swagger-ui-bundle.js")
        assert script.status_code == 200 and len(script.content) > 100_000
        missing = await client.get("/openapi/assets/nothing.js")
        assert missing.status_code == 404
        document = (await client.get("/openapi/openapi.json")).json()
        assert not any(path.startswith("/openapi") for path in document["paths"])
