"""Plugin mode (reference §2.1.1) against a small authorization service on loopback: allowed,
denied, its own errors relayed with its status, unreachable; the signature is checked first
when keys are configured, and is not when none are (the service is then the only check)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any
from uuid import uuid4

import httpx
import pytest

from adapters.auth.jwt_verifier import PyJwtTokenVerifier, UnverifiedClaimsReader
from adapters.auth.keys import ASYMMETRIC_ALGORITHMS, JwksKeySource
from adapters.auth.plugin import EDITOR_SUBJECT, MAX_ANSWER_BYTES, PluginAuthorizer
from entrypoints.http.auth import HttpSecurity
from tests.integration.auth_servers import (
    AuthorizeServer,
    InPieces,
    LocalIdentityProvider,
    Redirect,
    new_key,
)
from tests.integration.connection_api import in_loop_client
from tests.integration.test_auth_routes import BASE, CONNECTION, PRODUCT, bearer, build_app
from tests.support.twins import app  # noqa: F401  (fixture)


@pytest.fixture(scope="module")
def idp() -> Iterator[LocalIdentityProvider]:
    provider = LocalIdentityProvider().start()
    try:
        yield provider
    finally:
        provider.stop()


@pytest.fixture
def service() -> Iterator[AuthorizeServer]:
    server = AuthorizeServer().start()
    try:
        yield server
    finally:
        server.stop()


async def plugin_client(app, verifier, address: str, timeout: float = 5.0):  # noqa: F811
    authorizer = PluginAuthorizer(address, timeout=timeout)
    await authorizer.open()
    client = in_loop_client(build_app(app, HttpSecurity(verifier, authorizer)))
    return client, authorizer


@pytest.fixture
async def client(app, idp, service) -> AsyncIterator[httpx.AsyncClient]:  # noqa: F811
    keys = JwksKeySource(issuer=idp.issuer)
    await keys.open()
    verifier = PyJwtTokenVerifier(
        keys, issuer=idp.issuer, audience=[idp.audience], algorithms=ASYMMETRIC_ALGORITHMS
    )
    test_client, authorizer = await plugin_client(app, verifier, service.base_url)
    try:
        async with test_client:
            yield test_client
    finally:
        await authorizer.close()
        await keys.close()


async def test_allowed_the_service_is_asked_with_subject_resource_action_and_token(
    client, idp, service
):
    token = idp.token([])  # no permissions claimed: the service decides
    response = await client.post(BASE, json=CONNECTION, headers={**PRODUCT, **bearer(token)})
    assert response.status_code == 201, response.text
    assert service.asked == [{"sub": EDITOR_SUBJECT, "resource": "connections", "action": "post"}]
    assert service.authorizations == [f"Bearer {token}"]

    user = idp.token([], type="normal-user", owner="lerian", sub="u-42")
    assert (await client.get(f"{BASE}/unassigned", headers=bearer(user))).status_code == 200
    assert service.asked[-1] == {"sub": "lerian/u-42", "resource": "connections", "action": "get"}


async def test_a_normal_user_without_an_owner_is_refused(client, idp, service):
    token = idp.token([], type="normal-user")
    response = await client.get(BASE, headers=bearer(token))
    assert response.status_code == 401 and response.json()["code"] == "FET-0006"
    assert service.asked == []


async def test_denied_is_403(client, idp, service):
    service.decide = lambda body, authorization: (200, {"authorized": False})
    response = await client.delete(f"{BASE}/{uuid4()}", headers=bearer(idp.token()))
    assert response.status_code == 403
    assert response.json() == {
        "code": "FET-0007",
        "title": "Forbidden",
        "message": "The authorization service denied this request.",
    }
    assert service.asked == [{"sub": EDITOR_SUBJECT, "resource": "connections", "action": "delete"}]


@pytest.mark.parametrize(
    ("answer", "kind"),
    [
        ({"authorized": "true"}, "a string"),
        ({"authorized": 1}, "a number"),
        ({"authorized": 0}, "a number"),
        ({"authorized": {}}, "an object"),
        ({"authorized": []}, "an array"),
        ({"authorized": None}, "null"),
        ({}, "missing"),
        ({"allowed": True}, "missing"),
    ],
    ids=["string", "number", "zero", "object", "array", "null", "empty", "other-field"],
)
async def test_only_the_json_boolean_true_authorizes(client, idp, service, caplog, answer, kind):
    """Anything but ``"authorized": true`` is a refusal, logged with the kind of answer (never
    its value)."""
    service.decide = lambda body, authorization: (200, answer)
    with caplog.at_level("WARNING", logger="adapters.auth.plugin"):
        response = await client.delete(f"{BASE}/{uuid4()}", headers=bearer(idp.token()))
    assert response.status_code == 403, response.text
    assert response.json()["code"] == "FET-0007"
    [line] = [r.getMessage() for r in caplog.records if r.name == "adapters.auth.plugin"]
    assert f"(authorized: {kind})" in line and "denied" in line


@pytest.mark.parametrize(
    ("answer", "kind"),
    [
        (b"true", "a boolean"),
        (b"[true]", "an array"),
        (b'"authorized"', "a string"),
        (b"null", "null"),
    ],
    ids=["bare-true", "array", "string", "null"],
)
async def test_a_json_answer_that_is_not_a_decision_object_is_refused(
    client, idp, service, caplog, answer, kind
):
    service.decide = lambda body, authorization: (200, answer)
    with caplog.at_level("WARNING", logger="adapters.auth.plugin"):
        response = await client.delete(f"{BASE}/{uuid4()}", headers=bearer(idp.token()))
    assert response.status_code == 403, response.text
    assert response.json()["code"] == "FET-0007"
    [line] = [r.getMessage() for r in caplog.records if r.name == "adapters.auth.plugin"]
    assert f"(answer: {kind})" in line and "denied" in line


async def test_the_history_is_asked_as_history_then_as_fetcher_get(client, idp, service):
    def only_get(body: dict[str, Any], authorization: str) -> tuple[int, Any]:
        return 200, {"authorized": body["action"] == "get"}

    service.decide = only_get
    job_id = "0190f0f0-0000-7000-8000-000000000000"
    response = await client.get(f"/v1/fetcher/{job_id}/events", headers=bearer(idp.token()))
    assert response.status_code == 404  # allowed; no such job
    assert [(a["resource"], a["action"]) for a in service.asked] == [
        ("fetcher", "history"),
        ("fetcher", "get"),
    ]


async def test_the_services_own_errors_are_relayed_with_its_status(client, idp, service):
    token = idp.token()
    service.decide = lambda body, authorization: (
        401,
        {"code": "AUT-1004", "title": "Token Expired", "message": f"token {token} expired"},
    )
    response = await client.get(BASE, headers=bearer(token))
    assert response.status_code == 401
    assert response.json() == {
        "code": "AUT-1004",
        "title": "Token Expired",
        "message": "token [REDACTED] expired",
    }
    assert response.headers["www-authenticate"] == 'Bearer error="invalid_token"'

    service.decide = lambda body, authorization: (500, b"<html>boom</html>")
    response = await client.get(BASE, headers=bearer(token))
    assert response.status_code == 500
    assert response.json() == {
        "code": "FET-0009",
        "title": "Auth Service Error",
        "message": "The authorization service refused the request.",
    }
    service.decide = lambda body, authorization: (200, b"not json")
    response = await client.get(BASE, headers=bearer(token))
    assert response.status_code == 503 and response.json()["code"] == "FET-0008"


async def test_the_signature_is_checked_before_the_service_is_asked(client, idp, service):
    forged = idp.token(key=new_key(kid=idp.current.kid))
    expired = idp.token(exp=int(time.time()) - 300)
    for token in (forged, expired):
        assert (await client.get(BASE, headers=bearer(token))).status_code == 401
    assert (await client.get(BASE)).status_code == 401
    assert service.asked == []


async def test_an_unreachable_service_is_503(app, idp):  # noqa: F811
    stopped = AuthorizeServer().start()
    address = stopped.base_url
    stopped.stop()
    test_client, authorizer = await plugin_client(app, UnverifiedClaimsReader(), address)
    try:
        async with test_client:
            response = await test_client.get(BASE, headers=bearer(idp.token()))
        assert response.status_code == 503
        assert response.json() == {
            "code": "FET-0008",
            "title": "Auth Service Unavailable",
            "message": "The authorization service could not be reached. Please try again later.",
        }
    finally:
        await authorizer.close()


async def test_a_service_slower_than_the_timeout_is_503(app, idp):  # noqa: F811
    def slow(body: dict[str, Any], authorization: str) -> tuple[int, Any]:
        time.sleep(1.0)
        return 200, {"authorized": True}

    server = AuthorizeServer(decide=slow).start()
    test_client, authorizer = await plugin_client(
        app, UnverifiedClaimsReader(), server.base_url, timeout=0.3
    )
    try:
        async with test_client:
            response = await test_client.get(BASE, headers=bearer(idp.token()))
        assert response.status_code == 503 and response.json()["code"] == "FET-0008"
    finally:
        await authorizer.close()
        await asyncio.to_thread(server.stop)


async def test_without_keys_the_service_is_the_only_check(app, idp, service):  # noqa: F811
    test_client, authorizer = await plugin_client(app, UnverifiedClaimsReader(), service.base_url)
    try:
        async with test_client:
            forged = idp.token(key=new_key())
            assert (await test_client.get(BASE, headers=bearer(forged))).status_code == 200
            response = await test_client.get(BASE, headers=bearer("not-a-jwt"))
            assert response.status_code == 401
        assert json.dumps(service.asked).count("connections") == 1
    finally:
        await authorizer.close()


async def test_an_answer_up_to_the_size_limit_is_read_and_a_longer_one_is_not(client, idp, service):
    def answer(size: int) -> bytes:
        head = b'{"authorized": true, "pad": "'
        return head + b"x" * (size - len(head) - 2) + b'"}'

    limit = 64 * 1024  # the documented limit, written out: not read from the code under test
    assert limit == MAX_ANSWER_BYTES
    service.decide = lambda body, authorization: (200, answer(limit))
    assert (await client.get(BASE, headers=bearer(idp.token()))).status_code == 200
    service.decide = lambda body, authorization: (200, answer(limit + 1))
    response = await client.get(BASE, headers=bearer(idp.token()))
    assert response.status_code == 503 and response.json()["code"] == "FET-0008"


async def test_an_answer_that_arrives_in_pieces_is_read_whole(client, idp, service):
    """One read of the socket is not the whole answer: the decision at its end still counts."""
    answer = b'{"pad": "' + b"x" * 40_000 + b'", "authorized": true}'
    service.decide = lambda body, authorization: (200, InPieces(answer, pieces=4))
    assert (await client.get(BASE, headers=bearer(idp.token()))).status_code == 200
    too_long = b'{"pad": "' + b"x" * MAX_ANSWER_BYTES + b'", "authorized": true}'
    service.decide = lambda body, authorization: (200, InPieces(too_long, pieces=4))
    response = await client.get(BASE, headers=bearer(idp.token()))
    assert response.status_code == 503 and response.json()["code"] == "FET-0008"


@pytest.mark.parametrize("status", [201, 299])
async def test_any_2xx_answer_decides(client, idp, service, status):
    service.decide = lambda body, authorization: (status, {"authorized": True})
    assert (await client.get(BASE, headers=bearer(idp.token()))).status_code == 200


@pytest.mark.parametrize("status", [300, 302, 399])
async def test_a_3xx_answer_is_not_a_decision_nor_followed(client, idp, service, status):
    """Not even a redirect to a service that would allow: the address configured is the one
    asked."""
    elsewhere = AuthorizeServer().start()
    try:
        target = Redirect(f"{elsewhere.base_url}/v1/authorize")
        service.decide = lambda body, authorization: (status, target)
        response = await client.get(BASE, headers=bearer(idp.token()))
        assert response.status_code == 503 and response.json()["code"] == "FET-0008"
        assert elsewhere.asked == []
    finally:
        await asyncio.to_thread(elsewhere.stop)


async def test_a_400_answer_is_relayed_with_its_status(client, idp, service):
    service.decide = lambda body, authorization: (
        400,
        {"code": "AUT-0400", "title": "Bad Request", "message": "bad subject"},
    )
    response = await client.get(BASE, headers=bearer(idp.token()))
    assert response.status_code == 400
    assert response.json()["code"] == "AUT-0400"


async def test_an_error_answer_without_three_texts_is_relayed_generically(client, idp, service):
    service.decide = lambda body, authorization: (
        401,
        {"code": 4001, "title": "Unauthorized", "message": "no"},
    )
    response = await client.get(BASE, headers=bearer(idp.token()))
    assert response.status_code == 401
    assert response.json()["code"] == "FET-0009"


@pytest.mark.parametrize(
    "permission_route",
    [
        ("delete", f"{BASE}/{uuid4()}"),
        ("get", BASE),
        ("get", "/v1/fetcher/" + str(uuid4())),
        ("post", "/v1/fetcher"),
    ],
    ids=["connections-delete", "connections-get", "fetcher-get", "fetcher-post"],
)
async def test_a_denied_permission_other_than_the_history_is_asked_once(
    client, idp, service, permission_route
):
    method, path = permission_route
    service.decide = lambda body, authorization: (200, {"authorized": False})
    response = await client.request(
        method.upper(), path, headers=bearer(idp.token()), json={} if method == "post" else None
    )
    assert response.status_code == 403
    assert len(service.asked) == 1


async def test_a_plain_false_is_a_refusal_without_a_warning(client, idp, service, caplog):
    service.decide = lambda body, authorization: (200, {"authorized": False})
    with caplog.at_level("WARNING", logger="adapters.auth.plugin"):
        response = await client.get(BASE, headers=bearer(idp.token()))
    assert response.status_code == 403
    assert [r for r in caplog.records if r.name == "adapters.auth.plugin"] == []


@pytest.mark.parametrize(
    "claims",
    [{"owner": 5, "sub": "u-1"}, {"owner": "lerian", "sub": 7}, {"owner": "lerian", "sub": ""}],
    ids=["owner-not-text", "sub-not-text", "sub-empty"],
)
async def test_a_normal_user_needs_an_owner_and_a_subject_as_text(client, idp, service, claims):
    token = idp.token([], type="normal-user", **claims)
    response = await client.get(BASE, headers=bearer(token))
    assert response.status_code == 401, response.text
    assert service.asked == []


async def test_the_authorizer_asks_its_address_and_closes_safely(service):
    authorizer = PluginAuthorizer(service.base_url + "/")
    assert authorizer.url == f"{service.base_url}/v1/authorize"
    await authorizer.close()  # never opened: nothing to close
    await authorizer.open()
    await authorizer.close()
    await authorizer.close()


@pytest.mark.parametrize("status", [300, 301])
async def test_a_3xx_answer_with_a_decision_in_it_is_still_no_decision(
    client, idp, service, status
):
    service.decide = lambda body, authorization: (status, {"authorized": True})
    response = await client.get(BASE, headers=bearer(idp.token()))
    assert response.status_code == 503 and response.json()["code"] == "FET-0008"
