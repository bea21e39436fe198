"""Every route of the API against tokens of an issuer served on loopback: the open routes
answer without one; every other route answers 401 without a valid token, 403 without its
permission, and its normal answer with that permission alone.

The routes are enumerated from the app, so a new route that is neither open nor in
``ROUTES`` (with the permission of reference §2.1) fails here."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any
from uuid import UUID, uuid4

import httpx
import pytest
from litestar import Litestar
from litestar.handlers import HTTPRouteHandler

from adapters.auth.claims import ClaimPermissions
from adapters.auth.jwt_verifier import PyJwtTokenVerifier
from adapters.auth.keys import ASYMMETRIC_ALGORITHMS, JwksKeySource
from application.jobs.fresh_index import FreshJobIndex
from application.jobs.queries.get_job import GetJob, GetJobHistory
from application.jobs.queries.search_jobs import SearchJobs
from domain.identity import Permission, granting
from domain.tenant import SINGLE_TENANT
from entrypoints.http.app import create_app
from entrypoints.http.auth import BEARER, OPEN_ROUTES, HttpSecurity, is_open
from entrypoints.http.guards import permission_of, requires_permission
from entrypoints.roles import ApiServices, ConsoleServices
from tests.integration.auth_servers import (
    ALL_PERMISSIONS,
    LocalIdentityProvider,
    new_key,
    unsigned_token,
)
from tests.integration.connection_api import in_loop_client
from tests.support.connection_kit import make_kit
from tests.support.twins import app  # noqa: F401  (fixture)

BASE = "/v1/management/connections"
PRODUCT = {"X-Product-Name": "Payments"}
CONNECTION = {
    "configName": "pgsql",
    "type": "POSTGRESQL",
    "host": "db.local",
    "port": 5432,
    "databaseName": "pgsql",
    "userName": "reader",
    "password": "very secret",
}
P = Permission

ROUTES: dict[tuple[str, str], Permission] = {
    ("POST", BASE): P.CONNECTIONS_POST,
    ("GET", BASE): P.CONNECTIONS_GET,
    ("GET", f"{BASE}/unassigned"): P.CONNECTIONS_GET,
    ("POST", f"{BASE}/validate-schema"): P.CONNECTIONS_POST,
    ("GET", f"{BASE}/{{connection_id}}"): P.CONNECTIONS_GET,
    ("PATCH", f"{BASE}/{{connection_id}}"): P.CONNECTIONS_PATCH,
    ("DELETE", f"{BASE}/{{connection_id}}"): P.CONNECTIONS_DELETE,
    ("POST", f"{BASE}/{{connection_id}}/test"): P.CONNECTIONS_POST,
    ("GET", f"{BASE}/{{connection_id}}/schema"): P.CONNECTIONS_GET,
    ("POST", f"{BASE}/{{connection_id}}/assign"): P.CONNECTIONS_POST,
    ("POST", "/v1/fetcher"): P.FETCHER_POST,
    ("GET", "/v1/fetcher/{job_id}"): P.FETCHER_GET,
    ("GET", "/v1/fetcher/{job_id}/events"): P.FETCHER_HISTORY,
    ("GET", "/v1/fetcher/{job_id}/proof"): P.FETCHER_HISTORY,
    ("GET", "/v1/audit/checkpoints"): P.FETCHER_HISTORY,
    # The console's fragments need the permission of the API route each mirrors.
    ("GET", "/v1/console/jobs"): P.FETCHER_GET,
    ("GET", "/v1/console/jobs/{job_id}"): P.FETCHER_GET,
    ("GET", "/v1/console/jobs/{job_id}/history"): P.FETCHER_HISTORY,
    ("POST", "/v1/console/jobs/{job_id}/verify"): P.FETCHER_HISTORY,
    ("GET", "/v1/console/connections"): P.CONNECTIONS_GET,
    ("POST", "/v1/console/connections/{connection_id}/test"): P.CONNECTIONS_POST,
    ("GET", "/v1/console/connections/{connection_id}/schema"): P.CONNECTIONS_GET,
    ("GET", "/v1/console/checkpoints"): P.FETCHER_HISTORY,
    ("GET", "/v1/console/bundle"): P.FETCHER_HISTORY,
}
"""Reference §2.1: validate-schema, test and assign are ``connections:post``; schema and the
unassigned list ``connections:get``; the job history and the audit checkpoints are
``fetcher:history``."""


@dataclass
class World:
    """What the happy requests name: a connection, one without a product, a job."""

    connection: str
    unassigned: str
    job: str


Request = tuple[str, dict[str, Any], int]
HAPPY: dict[tuple[str, str], Callable[[World], Request]] = {
    ("POST", BASE): lambda w: (
        BASE,
        {"json": {**CONNECTION, "configName": "fresh"}, "headers": PRODUCT},
        201,
    ),
    ("GET", BASE): lambda w: (BASE, {}, 200),
    ("GET", f"{BASE}/unassigned"): lambda w: (f"{BASE}/unassigned", {}, 200),
    ("POST", f"{BASE}/validate-schema"): lambda w: (
        f"{BASE}/validate-schema",
        {"json": {"mappedFields": {"pgsql": {"accounts": ["id"]}}}},
        200,
    ),
    ("GET", f"{BASE}/{{connection_id}}"): lambda w: (f"{BASE}/{w.connection}", {}, 200),
    ("PATCH", f"{BASE}/{{connection_id}}"): lambda w: (
        f"{BASE}/{w.connection}",
        {"json": {"port": 5433}},
        200,
    ),
    ("DELETE", f"{BASE}/{{connection_id}}"): lambda w: (f"{BASE}/{w.connection}", {}, 204),
    ("POST", f"{BASE}/{{connection_id}}/test"): lambda w: (
        f"{BASE}/{w.connection}/test",
        {},
        200,
    ),
    ("GET", f"{BASE}/{{connection_id}}/schema"): lambda w: (
        f"{BASE}/{w.connection}/schema",
        {},
        200,
    ),
    ("POST", f"{BASE}/{{connection_id}}/assign"): lambda w: (
        f"{BASE}/{w.unassigned}/assign",
        {"headers": PRODUCT},
        200,
    ),
    ("POST", "/v1/fetcher"): lambda w: (
        "/v1/fetcher",
        {
            "json": {
                "dataRequest": {"mappedFields": {"pgsql": {"accounts": ["id", "name"]}}},
                "metadata": {"source": "payments", "tag": "happy"},
            }
        },
        202,
    ),
    ("GET", "/v1/fetcher/{job_id}"): lambda w: (f"/v1/fetcher/{w.job}", {}, 200),
    ("GET", "/v1/fetcher/{job_id}/events"): lambda w: (f"/v1/fetcher/{w.job}/events", {}, 200),
    # The twins' event store keeps no audit trail: the job is found, and there is no proof.
    ("GET", "/v1/fetcher/{job_id}/proof"): lambda w: (f"/v1/fetcher/{w.job}/proof", {}, 404),
    ("GET", "/v1/audit/checkpoints"): lambda w: ("/v1/audit/checkpoints", {}, 200),
    ("GET", "/v1/console/jobs"): lambda w: ("/v1/console/jobs", {}, 200),
    ("GET", "/v1/console/jobs/{job_id}"): lambda w: (f"/v1/console/jobs/{w.job}", {}, 200),
    ("GET", "/v1/console/jobs/{job_id}/history"): lambda w: (
        f"/v1/console/jobs/{w.job}/history",
        {},
        200,
    ),
    ("POST", "/v1/console/jobs/{job_id}/verify"): lambda w: (
        f"/v1/console/jobs/{w.job}/verify",
        {},
        200,
    ),
    ("GET", "/v1/console/connections"): lambda w: ("/v1/console/connections", {}, 200),
    ("POST", "/v1/console/connections/{connection_id}/test"): lambda w: (
        f"/v1/console/connections/{w.connection}/test",
        {},
        200,
    ),
    ("GET", "/v1/console/connections/{connection_id}/schema"): lambda w: (
        f"/v1/console/connections/{w.connection}/schema",
        {},
        200,
    ),
    ("GET", "/v1/console/checkpoints"): lambda w: ("/v1/console/checkpoints", {}, 200),
    ("GET", "/v1/console/bundle"): lambda w: ("/v1/console/bundle", {}, 404),
}


def route_id(route: tuple[str, str]) -> str:
    return f"{route[0]} {route[1]}"


@pytest.fixture(scope="module")
def idp() -> Iterator[LocalIdentityProvider]:
    provider = LocalIdentityProvider().start()
    try:
        yield provider
    finally:
        provider.stop()


@pytest.fixture
async def security(idp: LocalIdentityProvider) -> AsyncIterator[HttpSecurity]:
    keys = JwksKeySource(issuer=idp.issuer)
    await keys.open()
    try:
        verifier = PyJwtTokenVerifier(
            keys,
            issuer=idp.issuer,
            audience=[idp.audience],
            algorithms=ASYMMETRIC_ALGORITHMS,
        )
        yield HttpSecurity(verifier, ClaimPermissions())
    finally:
        await keys.close()


def build_app(app, security: HttpSecurity) -> Litestar:  # noqa: F811
    services = ApiServices(
        request_job=app.request_job,
        get_job=GetJob(app.jobs),
        get_job_history=GetJobHistory(app.jobs),
        connections=make_kit(app).services,
        console=ConsoleServices(SearchJobs(FreshJobIndex(app.job_index, app.store))),
    )
    return create_app(services, security)


@pytest.fixture
async def client(app, security) -> AsyncIterator[httpx.AsyncClient]:  # noqa: F811
    async with in_loop_client(build_app(app, security)) as test_client:
        yield test_client


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
async def world(client, app, idp) -> World:  # noqa: F811
    admin = bearer(idp.token())
    created = await client.post(BASE, json=CONNECTION, headers={**PRODUCT, **admin})
    assert created.status_code == 201, created.text
    stored = await app.repository.get(UUID(created.json()["id"]), tenant=SINGLE_TENANT)
    legacy = replace(stored, id=uuid4(), config_name="legacy", product_name="")
    await app.repository.add(legacy)
    job = await client.post(
        "/v1/fetcher",
        json={
            "dataRequest": {"mappedFields": {"pgsql": {"accounts": ["id"]}}},
            "metadata": {"source": "payments"},
        },
        headers=admin,
    )
    assert job.status_code == 202, job.text
    return World(created.json()["id"], str(legacy.id), job.json()["jobId"])


async def call(client: httpx.AsyncClient, route, world: World, token: str | None = None):
    path, options, _ = HAPPY[route](world)
    headers = {**options.get("headers", {}), **(bearer(token) if token else {})}
    return await client.request(route[0], path, json=options.get("json"), headers=headers)


def app_routes(application: Litestar) -> dict[tuple[str, str], HTTPRouteHandler]:
    found = {}
    for route in application.routes:
        for handler in route.route_handlers:
            if not isinstance(handler, HTTPRouteHandler):
                continue
            for method in handler.http_methods:
                if method != "OPTIONS":
                    found[(method, route.path_format)] = handler
    return found


def test_every_route_is_open_or_guarded_by_its_permission(app):  # noqa: F811
    routes = app_routes(build_app(app, HttpSecurity()))
    guarded = {route for route in routes if not is_open(route[1])}
    assert guarded == set(ROUTES) == set(HAPPY)
    for route, handler in routes.items():
        guards = handler.resolve_guards()
        if route in ROUTES:
            assert guards == [requires_permission], route
            assert permission_of(handler) is ROUTES[route], route
        else:
            assert guards == [] and permission_of(handler) is None, route


def test_the_open_route_list():
    assert OPEN_ROUTES == (
        "/health",
        "/readyz",
        "/readyz/tenant/{tenant_id}",
        "/version",
        "/metrics",
        "/openapi",
        "/openapi/*",
        "/console",
        "/console/*",
        "/console-assets/*",
    )
    for path in ("/health", "/readyz", "/readyz/tenant/acme", "/version", "/metrics"):
        assert is_open(path), path
    for path in ("/openapi", "/openapi/openapi.json", "/openapi/swagger"):
        assert is_open(path), path
    for path in ("/console", "/console/jobs/x/history", "/console-assets/console.js"):
        assert is_open(path), path  # the page and its files: no data
    closed = ("/healthz", "/readyz/tenant/a/b", "/v1/fetcher", "/openapix", "/version/x", "/")
    closed += ("/consolex", "/v1/console/jobs", "/v1/console")
    for path in closed:
        assert not is_open(path), path


async def test_open_routes_answer_without_a_token_and_ignore_a_bad_one(client, app):  # noqa: F811
    paths = [path for method, path in app_routes(build_app(app, HttpSecurity())) if is_open(path)]
    assert {"/health", "/readyz", "/version", "/openapi", "/openapi/openapi.json"} <= set(paths)
    for path in ("/health", "/readyz", "/version", "/openapi/openapi.json", "/openapi/swagger"):
        for headers in ({}, bearer("not-a-token")):
            response = await client.get(path, headers=headers)
            assert response.status_code == 200, (path, response.text)


@pytest.mark.parametrize("route", ROUTES, ids=route_id)
async def test_route_refuses_a_request_without_a_valid_token(client, idp, world, route, caplog):
    response = await call(client, route, world)
    assert response.status_code == 401, response.text
    assert response.json() == {
        "code": "FET-0006",
        "title": "Unauthorized",
        "message": "This route requires a bearer token in the Authorization header.",
    }
    assert response.headers["www-authenticate"] == "Bearer"
    now = int(time.time())
    bad = {
        "bad signature": idp.token(key=new_key(kid=idp.current.kid)),
        "expired": idp.token(exp=now - 120),
        "not yet valid": idp.token(nbf=now + 120),
        "wrong audience": idp.token(aud="someone-else"),
        "wrong issuer": idp.token(iss="https://evil.example/realms/fetcher"),
        "alg none": unsigned_token(idp.claims()),
    }
    with caplog.at_level(logging.DEBUG):
        for case, token in bad.items():
            response = await call(client, route, world, token)
            assert response.status_code == 401, (case, response.text)
            body = response.json()
            assert body["code"] == "FET-0006" and set(body) == {"code", "title", "message"}
            assert response.headers["www-authenticate"] == 'Bearer error="invalid_token"'
            assert token not in response.text
            assert token not in caplog.text


@pytest.mark.parametrize("route", ROUTES, ids=route_id)
async def test_route_refuses_a_token_without_its_permission(client, idp, world, route):
    needed = ROUTES[route]
    others = [p for p in ALL_PERMISSIONS if P(p) not in granting(needed)]
    response = await call(client, route, world, idp.token(others))
    assert response.status_code == 403, response.text
    assert response.json() == {
        "code": "FET-0007",
        "title": "Forbidden",
        "message": f"The token does not grant the permission '{needed}' this route requires.",
    }
    assert response.headers["www-authenticate"] == (
        f'Bearer error="insufficient_scope", scope="{needed}"'
    )


@pytest.mark.parametrize("route", ROUTES, ids=route_id)
async def test_route_answers_with_its_permission_alone(client, idp, world, route):
    response = await call(client, route, world, idp.token([ROUTES[route]]))
    assert response.status_code == HAPPY[route](world)[2], response.text


async def test_fetcher_get_also_grants_the_history_and_history_grants_nothing_else(
    client, idp, world
):
    reader = bearer(idp.token(["fetcher:get"]))
    assert (await client.get(f"/v1/fetcher/{world.job}/events", headers=reader)).status_code == 200
    auditor = bearer(idp.token(["fetcher:history"]))
    assert (await client.get(f"/v1/fetcher/{world.job}/events", headers=auditor)).status_code == 200
    for route in ROUTES:
        if ROUTES[route] is not P.FETCHER_HISTORY:
            response = await call(client, route, world, idp.token(["fetcher:history"]))
            assert response.status_code == 403, route


async def test_a_bare_token_is_accepted_and_other_schemes_are_no_token(client, idp):
    token = idp.token()
    assert (await client.get(BASE, headers={"Authorization": token})).status_code == 200
    assert (await client.get(BASE, headers={"Authorization": f"bearer  {token}"})).status_code == (
        200
    )
    for header in ("Basic dXNlcjpwYXNz", "Bearer", "Bearer  ", ""):
        response = await client.get(BASE, headers={"Authorization": header})
        assert response.status_code == 401 and response.headers["www-authenticate"] == "Bearer"


async def test_a_body_must_be_json_and_the_token_comes_first(client, idp):
    body = b'{"dataRequest": {"mappedFields": {"pgsql": {"accounts": ["id"]}}}}'
    plain = {"Content-Type": "text/plain"}
    assert (await client.post("/v1/fetcher", content=body, headers=plain)).status_code == 401
    response = await client.post(
        "/v1/fetcher", content=body, headers={**plain, **bearer(idp.token())}
    )
    assert response.status_code == 400
    assert response.json()["code"] == "FET-0001"


async def test_the_openapi_document_declares_the_bearer_scheme_where_needed(client):
    document = (await client.get("/openapi/openapi.json")).json()
    scheme = document["components"]["securitySchemes"][BEARER]
    assert (scheme["type"], scheme["scheme"], scheme["bearerFormat"]) == ("http", "bearer", "JWT")
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            expected = None if is_open(path) else [{BEARER: []}]
            assert operation.get("security") == expected, (method, path)
            if expected:
                assert {"401", "403"} <= set(operation["responses"]), (method, path)


async def test_handlers_can_take_the_callers_identity_with_its_tenant(security, idp):
    from litestar import get
    from litestar.datastructures import State
    from litestar.di import NamedDependency, Provide
    from litestar.middleware import DefineMiddleware

    from domain.identity import Identity
    from entrypoints.http.auth import BearerAuthentication, provide_identity

    @get("/whoami", signature_namespace={"Identity": Identity, "NamedDependency": NamedDependency})
    async def whoami(identity: NamedDependency[Identity | None]) -> dict[str, Any]:
        assert identity is not None
        return {"subject": identity.subject, "tenant": identity.tenant}

    application = Litestar(
        route_handlers=[whoami],
        dependencies={"identity": Provide(provide_identity)},
        middleware=[DefineMiddleware(BearerAuthentication, verifier=security.verifier)],
        state=State({"security": security}),
    )
    async with in_loop_client(application) as test_client:
        response = await test_client.get("/whoami", headers=bearer(idp.token(tenantId="acme")))
    assert response.json() == {"subject": "user-1", "tenant": "acme"}


async def test_a_rotated_key_is_accepted_without_restart(app, idp):  # noqa: F811
    keys = JwksKeySource(issuer=idp.issuer, min_interval=0)
    await keys.open()
    verifier = PyJwtTokenVerifier(
        keys, issuer=idp.issuer, audience=[idp.audience], algorithms=ASYMMETRIC_ALGORITHMS
    )
    rotated = idp.rotate("ES256")
    try:
        async with in_loop_client(
            build_app(app, HttpSecurity(verifier, ClaimPermissions()))
        ) as test_client:
            response = await test_client.get(BASE, headers=bearer(idp.token(key=rotated)))
        assert response.status_code == 200, response.text
    finally:
        idp.keys.remove(rotated)
        await keys.close()
