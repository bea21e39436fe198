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
                if path == "/health" or path.startswith("/readyz"):
                    continue  # the probes answer their own bodies (reference §7), 503 included
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


def _operations(document: dict):
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if method in {"get", "post", "put", "patch", "delete"}:
                yield path, method, operation


def _has_example(media: dict) -> bool:
    return bool(media.get("example") is not None or media.get("examples"))


async def test_every_operation_and_parameter_is_described(document):
    missing = [
        f"{method.upper()} {path}"
        for path, method, operation in _operations(document)
        if not operation.get("description")
    ]
    assert missing == []
    undescribed = [
        f"{method.upper()} {path} {parameter['in']} {parameter['name']}"
        for path, method, operation in _operations(document)
        for parameter in operation.get("parameters", [])
        if not parameter.get("description")
    ]
    assert undescribed == []


async def test_every_request_body_and_success_answer_carries_an_example(document):
    without = []
    for path, method, operation in _operations(document):
        body = operation.get("requestBody", {}).get("content", {}).get("application/json")
        if body is not None and not _has_example(body):
            without.append(f"{method.upper()} {path} request")
        for status, answer in operation.get("responses", {}).items():
            media = answer.get("content", {}).get("application/json")
            if status.startswith("2") and media is not None and not _has_example(media):
                without.append(f"{method.upper()} {path} {status}")
    assert without == []


async def test_the_probes_document_their_503(document):
    health = document["paths"]["/health"]["get"]["responses"]["503"]["content"]["application/json"]
    assert health["example"] == {"status": "unhealthy", "reason": "self-probe failed"}
    ready = document["paths"]["/readyz"]["get"]["responses"]["503"]["content"]["application/json"]
    assert ready["schema"] == {"$ref": "#/components/schemas/ReadinessView"}
    test = document["paths"]["/v1/management/connections/{connection_id}/test"]["post"]
    assert test["responses"]["502"]["content"]["application/json"]["example"]["code"] == "FET-1041"


async def test_the_job_request_example_is_the_walk_through_not_a_generated_one(document):
    body = document["paths"]["/v1/fetcher"]["post"]["requestBody"]["content"]["application/json"]
    text = str(body.get("example") or body.get("examples"))
    assert "additionalProp" not in text
    assert "mappedFields" in text


async def test_every_example_fits_its_schema(document):
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource

    registry = Registry().with_resource(
        "urn:fetcher:openapi",
        Resource.from_contents(
            {"$schema": "https://json-schema.org/draft/2020-12/schema", **document}
        ),
    )
    checked = 0
    for path, method, operation in _operations(document):
        medias = [operation.get("requestBody", {}).get("content", {}).get("application/json")]
        medias += [
            answer.get("content", {}).get("application/json")
            for answer in operation.get("responses", {}).values()
        ]
        for media in medias:
            if not media or "example" not in media or "$ref" not in media.get("schema", {}):
                continue
            schema = {"$ref": "urn:fetcher:openapi" + media["schema"]["$ref"]}
            errors = list(
                Draft202012Validator(schema, registry=registry).iter_errors(media["example"])
            )
            assert errors == [], (method, path, [e.message for e in errors])
            checked += 1
    assert checked >= 20  # every example with a schema: 24 today
