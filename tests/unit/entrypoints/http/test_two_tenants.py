"""Two tenants on one API (multi-tenant mode, in-memory twins): every route of tenant A aimed at
tenant B's ids and names answers as if they did not exist, A's lists never show B's items,
and B's work message, event and stored result all carry B.

The routes are enumerated from the app, so a new route that is neither open nor listed here
(and does not take the caller's tenant) fails."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from litestar import Litestar
from litestar.handlers import HTTPRouteHandler
from litestar.testing import AsyncTestClient

from adapters.auth.claims import ClaimPermissions
from adapters.crypto.signing import HmacMessageSigner
from adapters.messaging.local import (
    InProcessWorkConsumer,
    InProcessWorkQueue,
    JsonlJobEventPublisher,
)
from adapters.messaging.wire.work import open_work_message
from application.connections.directory import internal_id
from domain.identity import Identity, Permission
from domain.tenant import Tenant
from entrypoints.composition import bootstrap
from entrypoints.composition.worker import work_handler
from entrypoints.http.app import create_app
from entrypoints.http.auth import HttpSecurity, is_open
from tests.support.twins import App, in_memory_settings

BASE = "/v1/management/connections"
PRODUCT = {"X-Product-Name": "payments"}
ALL = frozenset(p.value for p in Permission)
B = Tenant("tenant-b")
IDENTITIES = {
    "token-a": Identity("alice", ALL, "tenant-a"),
    "token-b": Identity("bob", ALL, "tenant-b"),
    "token-c": Identity("carol", ALL, "tenant-c"),
    "token-none": Identity("nobody", ALL, None),
    "token-bad": Identity("mallory", ALL, "../tenant-b"),
}
SETTINGS = {
    "MULTI_TENANT_ENABLED": "true",
    "MULTI_TENANT_ALLOWED_TENANTS": "tenant-a,tenant-b",
    "FETCHER_SSRF_GUARD": "false",
    "DATASOURCE_LEDGER_CONFIG_NAME": "ledger",
    "DATASOURCE_LEDGER_TYPE": "postgresql",
    "DATASOURCE_LEDGER_HOST": "db.local",
    "DATASOURCE_LEDGER_DATABASE": "pgsql",
    "DATASOURCE_LEDGER_TENANTS": "tenant-a",
}


class Tokens:
    """A token verifier that knows a few tokens, one per caller."""

    async def verify(self, token: str) -> Identity:
        from application.errors import Unauthenticated

        if token not in IDENTITIES:
            raise Unauthenticated("unknown token")
        return IDENTITIES[token]


def as_(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def connection_body(name: str) -> dict[str, Any]:
    return {
        "configName": name,
        "type": "POSTGRESQL",
        "host": "db.local",
        "port": 5432,
        "databaseName": "pgsql",
        "userName": "reader",
        "password": "very secret",
    }


@dataclass
class Tenants:
    client: AsyncTestClient[Litestar]
    app: App
    queue: InProcessWorkQueue
    events: Path
    internal_signer: HmacMessageSigner
    external_signer: HmacMessageSigner


@pytest.fixture
async def tenants(app: App, tmp_path: Path) -> AsyncIterator[Tenants]:
    internal = HmacMessageSigner.from_ring(app.ring, "internal")
    external = HmacMessageSigner.from_ring(app.ring, "external")
    queue = InProcessWorkQueue(internal)
    events = tmp_path / "events.jsonl"
    overrides = replace(
        app.overrides(),
        work_queue=queue,
        work_consumer=lambda handler: InProcessWorkConsumer(queue, internal, handler),
        event_publisher=JsonlJobEventPublisher(events, source="//s", signer=external),
    )
    async with bootstrap(in_memory_settings(tmp_path, **SETTINGS), overrides=overrides) as fetcher:
        app.fetcher = fetcher
        security = HttpSecurity(Tokens(), ClaimPermissions())
        async with AsyncTestClient(create_app(fetcher.api, security)) as client:
            yield Tenants(client, app, queue, events, internal, external)


@dataclass
class Theirs:
    """What tenant B has: a connection, one without a product, a completed job."""

    connection: str
    unassigned: str
    job: str


async def b_world(t: Tenants) -> Theirs:
    client = t.client
    created = await client.post(
        f"{BASE}/", json=connection_body("theirs"), headers={**PRODUCT, **as_("token-b")}
    )
    assert created.status_code == 201, created.text
    stored = await t.app.repository.get(UUID(created.json()["id"]), tenant=B)
    assert stored is not None and stored.tenant == B
    unowned = replace(stored, id=t.app.ids.new_id(), config_name="theirs_unowned", product_name="")
    await t.app.repository.add(unowned)
    job = await client.post(
        "/v1/fetcher/",
        json={
            "dataRequest": {"mappedFields": {"theirs": {"accounts": ["id", "name"]}}},
            "metadata": {"source": "payments"},
        },
        headers=as_("token-b"),
    )
    assert job.status_code == 202, job.text
    return Theirs(created.json()["id"], str(unowned.id), job.json()["jobId"])


Call = tuple[str, dict[str, Any], int, str]
AIMED_AT_B: dict[tuple[str, str], Callable[[Theirs], Call]] = {
    ("GET", BASE): lambda b: (BASE, {}, 200, ""),
    ("GET", f"{BASE}/unassigned"): lambda b: (f"{BASE}/unassigned", {}, 200, ""),
    ("POST", f"{BASE}/validate-schema"): lambda b: (
        f"{BASE}/validate-schema",
        {"json": {"mappedFields": {"theirs": {"accounts": ["id"]}}}},
        400,
        "FET-1062",
    ),
    ("GET", f"{BASE}/{{connection_id}}"): lambda b: (f"{BASE}/{b.connection}", {}, 404, "FET-1001"),
    ("PATCH", f"{BASE}/{{connection_id}}"): lambda b: (
        f"{BASE}/{b.connection}",
        {"json": {"port": 5433}},
        404,
        "FET-1001",
    ),
    ("DELETE", f"{BASE}/{{connection_id}}"): lambda b: (
        f"{BASE}/{b.connection}",
        {},
        404,
        "FET-1001",
    ),
    ("POST", f"{BASE}/{{connection_id}}/test"): lambda b: (
        f"{BASE}/{b.connection}/test",
        {},
        404,
        "FET-1001",
    ),
    ("GET", f"{BASE}/{{connection_id}}/schema"): lambda b: (
        f"{BASE}/{b.connection}/schema",
        {},
        404,
        "FET-1001",
    ),
    ("POST", f"{BASE}/{{connection_id}}/assign"): lambda b: (
        f"{BASE}/{b.unassigned}/assign",
        {"headers": PRODUCT},
        404,
        "FET-1001",
    ),
    ("POST", "/v1/fetcher"): lambda b: (
        "/v1/fetcher",
        {
            "json": {
                "dataRequest": {"mappedFields": {"theirs_unowned": {"accounts": ["id"]}}},
                "metadata": {"source": "payments"},
            }
        },
        400,
        "FET-1020",
    ),
    ("GET", "/v1/fetcher/{job_id}"): lambda b: (f"/v1/fetcher/{b.job}", {}, 404, "FET-1001"),
    ("GET", "/v1/fetcher/{job_id}/events"): lambda b: (
        f"/v1/fetcher/{b.job}/events",
        {},
        404,
        "FET-1001",
    ),
    ("GET", "/v1/audit/checkpoints"): lambda b: ("/v1/audit/checkpoints", {}, 200, ""),
    ("GET", "/v1/fetcher/{job_id}/proof"): lambda b: (
        f"/v1/fetcher/{b.job}/proof",
        {},
        404,
        "FET-1001",
    ),
    ("GET", "/v1/console/jobs"): lambda b: ("/v1/console/jobs", {}, 200, ""),
    ("GET", "/v1/console/jobs/{job_id}"): lambda b: (
        f"/v1/console/jobs/{b.job}",
        {},
        404,
        "FET-1001",
    ),
    ("GET", "/v1/console/jobs/{job_id}/history"): lambda b: (
        f"/v1/console/jobs/{b.job}/history",
        {},
        404,
        "FET-1001",
    ),
    ("POST", "/v1/console/jobs/{job_id}/verify"): lambda b: (
        f"/v1/console/jobs/{b.job}/verify",
        {},
        404,
        "FET-1001",
    ),
    ("GET", "/v1/console/connections"): lambda b: ("/v1/console/connections", {}, 200, ""),
    ("POST", "/v1/console/connections/{connection_id}/test"): lambda b: (
        f"/v1/console/connections/{b.connection}/test",
        {},
        404,
        "FET-1001",
    ),
    ("GET", "/v1/console/connections/{connection_id}/schema"): lambda b: (
        f"/v1/console/connections/{b.connection}/schema",
        {},
        404,
        "FET-1001",
    ),
    ("GET", "/v1/console/checkpoints"): lambda b: ("/v1/console/checkpoints", {}, 200, ""),
    # A bundle holds every tenant's records: no tenant exports one.
    ("GET", "/v1/console/bundle"): lambda b: ("/v1/console/bundle", {}, 403, ""),
    # Last, so that the other requests run while A has no connection of that name.
    ("POST", BASE): lambda b: (
        BASE,
        {"json": connection_body("theirs"), "headers": PRODUCT},
        201,  # B's name is free in A: nothing of B's is in the way
        "",
    ),
}


B_ON_ITS_OWN: dict[tuple[str, str], Callable[[Theirs], Call]] = {
    ("GET", BASE): lambda b: (BASE, {}, 200, ""),
    ("GET", f"{BASE}/unassigned"): lambda b: (f"{BASE}/unassigned", {}, 200, ""),
    ("POST", f"{BASE}/validate-schema"): lambda b: (
        f"{BASE}/validate-schema",
        {"json": {"mappedFields": {"theirs": {"accounts": ["id"]}}}},
        200,
        "",
    ),
    ("GET", f"{BASE}/{{connection_id}}"): lambda b: (f"{BASE}/{b.connection}", {}, 200, ""),
    # B's own pending job reads the connection: the job gate sees it.
    ("PATCH", f"{BASE}/{{connection_id}}"): lambda b: (
        f"{BASE}/{b.connection}",
        {"json": {"port": 5433}},
        409,
        "FET-1021",
    ),
    ("DELETE", f"{BASE}/{{connection_id}}"): lambda b: (
        f"{BASE}/{b.connection}",
        {},
        409,
        "FET-1021",
    ),
    ("POST", f"{BASE}/{{connection_id}}/test"): lambda b: (
        f"{BASE}/{b.connection}/test",
        {},
        200,
        "",
    ),
    ("GET", f"{BASE}/{{connection_id}}/schema"): lambda b: (
        f"{BASE}/{b.connection}/schema",
        {},
        200,
        "",
    ),
    ("POST", f"{BASE}/{{connection_id}}/assign"): lambda b: (
        f"{BASE}/{b.unassigned}/assign",
        {"headers": PRODUCT},
        200,
        "",
    ),
    ("POST", "/v1/fetcher"): lambda b: (
        "/v1/fetcher",
        {
            "json": {
                "dataRequest": {"mappedFields": {"theirs": {"accounts": ["id"]}}},
                "metadata": {"source": "payments"},
            }
        },
        202,
        "",
    ),
    ("GET", "/v1/fetcher/{job_id}"): lambda b: (f"/v1/fetcher/{b.job}", {}, 200, ""),
    ("GET", "/v1/fetcher/{job_id}/events"): lambda b: (f"/v1/fetcher/{b.job}/events", {}, 200, ""),
    ("GET", "/v1/audit/checkpoints"): lambda b: ("/v1/audit/checkpoints", {}, 200, ""),
    # B's job is found; the in-memory store keeps no audit trail to prove it against.
    ("GET", "/v1/fetcher/{job_id}/proof"): lambda b: (
        f"/v1/fetcher/{b.job}/proof",
        {},
        404,
        "FET-0005",
    ),
    ("GET", "/v1/console/jobs"): lambda b: ("/v1/console/jobs", {}, 200, ""),
    ("GET", "/v1/console/jobs/{job_id}"): lambda b: (f"/v1/console/jobs/{b.job}", {}, 200, ""),
    ("GET", "/v1/console/jobs/{job_id}/history"): lambda b: (
        f"/v1/console/jobs/{b.job}/history",
        {},
        200,
        "",
    ),
    ("POST", "/v1/console/jobs/{job_id}/verify"): lambda b: (
        f"/v1/console/jobs/{b.job}/verify",
        {},
        200,
        "",
    ),
    ("GET", "/v1/console/connections"): lambda b: ("/v1/console/connections", {}, 200, ""),
    ("POST", "/v1/console/connections/{connection_id}/test"): lambda b: (
        f"/v1/console/connections/{b.connection}/test",
        {},
        200,
        "",
    ),
    ("GET", "/v1/console/connections/{connection_id}/schema"): lambda b: (
        f"/v1/console/connections/{b.connection}/schema",
        {},
        200,
        "",
    ),
    ("GET", "/v1/console/checkpoints"): lambda b: ("/v1/console/checkpoints", {}, 200, ""),
    ("GET", "/v1/console/bundle"): lambda b: ("/v1/console/bundle", {}, 403, ""),
    ("POST", BASE): lambda b: (
        BASE,
        {"json": connection_body("theirs"), "headers": PRODUCT},
        409,  # B's own name is taken in B
        "FET-1002",
    ),
}
"""The same routes as B: each finds B's own things (so a route that forgot the caller's
tenant, and ran as nobody's, fails here)."""


def app_routes(application: Litestar) -> dict[tuple[str, str], HTTPRouteHandler]:
    found: dict[tuple[str, str], HTTPRouteHandler] = {}
    for route in application.routes:
        for handler in getattr(route, "route_handlers", ()):
            if isinstance(handler, HTTPRouteHandler):
                for method in handler.http_methods:
                    if method != "OPTIONS":
                        found[(str(method), route.path_format)] = handler
    return found


async def test_every_guarded_route_takes_the_callers_tenant_and_is_aimed_at_b_here(tenants):
    routes = app_routes(tenants.client.app)
    guarded = {route: handler for route, handler in routes.items() if not is_open(route[1])}
    assert set(guarded) == set(AIMED_AT_B) == set(B_ON_ITS_OWN)
    for route, handler in guarded.items():
        assert "tenant" in handler.parsed_fn_signature.parameters, route


async def test_every_route_of_a_aimed_at_b_finds_nothing_of_b(tenants):
    theirs = await b_world(tenants)
    client = tenants.client
    for route, aimed in AIMED_AT_B.items():
        path, options, status, code = aimed(theirs)
        headers = {**options.get("headers", {}), **as_("token-a")}
        response = await client.request(route[0], path, json=options.get("json"), headers=headers)
        assert response.status_code == status, (route, response.text)
        if code:
            assert response.json()["code"] == code, (route, response.text)
        assert theirs.connection not in response.text and theirs.job not in response.text

    # B's things are all still there, unchanged, and every route finds them for B.
    for route, own in B_ON_ITS_OWN.items():
        path, options, status, code = own(theirs)
        headers = {**options.get("headers", {}), **as_("token-b")}
        response = await client.request(route[0], path, json=options.get("json"), headers=headers)
        assert response.status_code == status, (route, response.text)
        if code:
            assert response.json()["code"] == code, (route, response.text)
    read = await client.get(f"{BASE}/{theirs.connection}", headers=as_("token-b"))
    assert read.json()["port"] == 5432 and read.json()["productName"] == "payments"


async def test_lists_never_show_another_tenants_items(tenants):
    theirs = await b_world(tenants)
    client = tenants.client
    created = await client.post(
        f"{BASE}/", json=connection_body("mine"), headers={**PRODUCT, **as_("token-a")}
    )
    assert created.status_code == 201
    listed = (await client.get(f"{BASE}/", headers=as_("token-a"))).json()
    assert [c["configName"] for c in listed["items"]] == ["ledger", "mine"]
    assert listed["total"] == 2
    assert listed["items"][0]["id"] == str(internal_id("ledger", "tenant-a"))
    unassigned = (await client.get(f"{BASE}/unassigned", headers=as_("token-a"))).json()
    assert unassigned["items"] == [] and unassigned["total"] == 0

    for_b = (await client.get(f"{BASE}/", headers=as_("token-b"))).json()
    assert {c["id"] for c in for_b["items"]} == {theirs.connection, theirs.unassigned}
    ledger_of_a = f"{BASE}/{internal_id('ledger', 'tenant-a')}"
    assert (await client.get(ledger_of_a, headers=as_("token-b"))).status_code == 404
    assert (await client.get(ledger_of_a, headers=as_("token-a"))).status_code == 200


async def test_bs_work_message_event_and_result_carry_b(tenants):
    theirs = await b_world(tenants)
    wired = tenants.app
    await wired.dispatcher.run_once()
    message = tenants.queue.messages.get_nowait()
    assert message.headers["X-Tenant-ID"] == "tenant-b"
    order = open_work_message(
        headers=message.headers,
        body=message.body,
        exchange=message.exchange,
        routing_key=message.routing_key,
        signer=tenants.internal_signer,
        now=int(time.time()),
    )
    assert order.tenant == B and str(order.job_id) == theirs.job
    await work_handler(wired.fetcher.worker.run_job)(order)

    key = f"tenant-b/external-data/{theirs.job}.json"
    assert list(wired.storage.objects) == [key]
    job = (await tenants.client.get(f"/v1/fetcher/{theirs.job}", headers=as_("token-b"))).json()
    assert job["status"] == "completed" and job["resultPath"] == key

    await wired.emitter.run_once()
    [line] = tenants.events.read_text().splitlines()
    event = json.loads(line)
    headers = event["headers"]
    assert headers["ce-tenantid"] == headers["X-Tenant-ID"] == "tenant-b"
    tenants.external_signer.verify(
        headers=headers,
        exchange=event["exchange"],
        routing_key=event["routingKey"],
        body=event["body"].encode(),
        now=int(headers["t"]),
        max_age=None,
    )
    assert json.loads(event["body"])["result"]["path"] == key


@pytest.mark.parametrize(
    ("token", "status", "code"),
    [
        ("token-none", 400, "FET-1080"),
        ("token-bad", 400, "FET-1080"),
        ("token-c", 404, "FET-1081"),
    ],
)
async def test_a_caller_without_a_served_tenant_is_refused(tenants, token, status, code):
    client = tenants.client
    for method, path in (("GET", f"{BASE}/"), ("GET", f"/v1/fetcher/{UUID(int=1)}")):
        response = await client.request(method, path, headers=as_(token))
        assert response.status_code == status, response.text
        assert response.json()["code"] == code
        assert "../" not in response.text
    assert (await client.get(f"{BASE}/")).status_code == 401  # identity comes first


async def test_tenant_readiness_in_multi_tenant_mode(tenants):
    client = tenants.client
    ready = await client.get("/readyz/tenant/tenant-a")
    assert ready.status_code == 200, ready.text
    assert ready.json()["tenant_id"] == "tenant-a" and ready.json()["status"] == "healthy"
    assert set(ready.json()["checks"]) == set((await client.get("/readyz")).json()["checks"])
    unknown = await client.get("/readyz/tenant/tenant-c")
    assert unknown.status_code == 404
    assert unknown.json() == {"error": "tenant not found", "tenant_id": "tenant-c"}


async def test_tenant_readiness_in_single_tenant_mode(app):
    async with AsyncTestClient(create_app(app.fetcher.api)) as client:
        response = await client.get("/readyz/tenant/tenant-a")
    assert response.status_code == 400
    assert response.json() == {"error": "multi-tenant mode is disabled"}
