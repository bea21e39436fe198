"""Safe HTTP defaults: request bodies are JSON only, CORS is off unless origins are listed."""

from __future__ import annotations

import jwt
import pytest
from litestar.testing import AsyncTestClient

from adapters.auth.claims import ClaimPermissions
from adapters.auth.jwt_verifier import UnverifiedClaimsReader
from application.jobs.queries.get_job import GetJob, GetJobHistory
from entrypoints.http.app import create_app
from entrypoints.http.auth import HttpSecurity
from entrypoints.roles import ApiServices
from tests.support.connection_kit import make_kit
from tests.support.http import PRODUCT, assert_error

BODY = b'{"dataRequest": {"mappedFields": {"pgsql": {"accounts": ["id"]}}}, "metadata": {"source": "payments"}}'  # noqa: E501
UNPARSABLE = (
    "unable to parse request body: the body must be JSON sent with the header "
    "Content-Type: application/json"
)


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "text/plain; charset=utf-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/jsonp",
        None,
    ],
)
async def test_a_body_that_is_not_application_json_is_unparsable(client, content_type):
    headers = {"Content-Type": content_type} if content_type else {}
    response = await client.post("/v1/fetcher", content=BODY, headers=headers)
    assert_error(response, 400, "FET-0001", UNPARSABLE)
    response = await client.post(
        "/v1/management/connections", content=BODY, headers={**PRODUCT, **headers}
    )
    assert_error(response, 400, "FET-0001", UNPARSABLE)


@pytest.mark.parametrize(
    "content_type", ["application/json", "application/json; charset=utf-8", "Application/JSON"]
)
async def test_application_json_with_parameters_is_accepted(client, app, content_type):
    await app.connection()
    response = await client.post(
        "/v1/fetcher", content=BODY, headers={"Content-Type": content_type}
    )
    assert response.status_code == 202, response.text


async def test_cors_is_off_by_default(client):
    origin = {"Origin": "https://evil.example"}
    preflight = await client.options(
        "/v1/fetcher",
        headers={**origin, "Access-Control-Request-Method": "POST"},
    )
    assert "access-control-allow-origin" not in preflight.headers
    response = await client.get("/health", headers=origin)
    assert "access-control-allow-origin" not in response.headers


async def test_cors_allows_the_listed_origins_only_and_preflight_needs_no_token(app):
    services = ApiServices(
        request_job=app.request_job,
        get_job=GetJob(app.jobs),
        get_job_history=GetJobHistory(app.jobs),
        connections=make_kit(app).services,
    )
    security = HttpSecurity(
        UnverifiedClaimsReader(), ClaimPermissions(), cors_origins=("https://app.example.com",)
    )
    async with AsyncTestClient(create_app(services, security)) as test_client:
        request = {"Access-Control-Request-Method": "POST"}
        allowed = await test_client.options(
            "/v1/fetcher",
            headers={
                **request,
                "Origin": "https://app.example.com",
                "Access-Control-Request-Headers": "authorization,content-type",
            },
        )
        assert allowed.status_code in (200, 204), allowed.text
        assert allowed.headers["access-control-allow-origin"] == "https://app.example.com"
        allowed_headers = allowed.headers["access-control-allow-headers"].lower()
        assert "authorization" in allowed_headers and "content-type" in allowed_headers
        assert "access-control-allow-credentials" not in allowed.headers
        refused = await test_client.options(
            "/v1/fetcher", headers={**request, "Origin": "https://evil.example"}
        )
        assert "access-control-allow-origin" not in refused.headers
        token = jwt.encode({"sub": "s", "scope": "connections:get"}, "k" * 32, algorithm="HS256")
        listed = await test_client.get(
            "/v1/management/connections",
            headers={"Origin": "https://app.example.com", "Authorization": f"Bearer {token}"},
        )
        assert listed.status_code == 200
        assert listed.headers["access-control-allow-origin"] == "https://app.example.com"
