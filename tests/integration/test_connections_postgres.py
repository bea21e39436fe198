"""The connection API against real PostgreSQL: connections stored in PostgreSQL, a real
datasource database to test, discover and validate, key rotation, concurrent assignment, and
internal datasources and the SSRF guard wired by the composition root."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path
from uuid import UUID, uuid4

import httpx
import psycopg
import pytest

from adapters.crypto.keys import KeyRing
from application.connections.commands.assign_connection import AssignConnection
from application.connections.directory import internal_id
from domain.connection import Connection
from domain.errors import FetcherError
from domain.tenant import SINGLE_TENANT
from entrypoints.composition import bootstrap
from entrypoints.http.app import create_app
from entrypoints.roles import Role
from entrypoints.settings import Settings
from tests.integration.conftest import fresh_pg_database
from tests.integration.connection_api import (
    MASTER_KEY,
    Api,
    connections_api,
    in_loop_client,
    repository_from_url,
)

pytestmark = pytest.mark.integration

BASE = "/v1/management/connections"
PRODUCT = {"X-Product-Name": "payments"}
NEW_KEY = base64.b64encode(bytes(range(50, 82))).decode()
DATASOURCE_SQL = """
CREATE SCHEMA sales;
CREATE TABLE accounts (id bigint PRIMARY KEY, name text, opened date);
CREATE TABLE sales.orders (id bigint, total numeric(12,2), "Mixed" text);
CREATE VIEW account_names AS SELECT name FROM accounts;
INSERT INTO accounts VALUES (1, 'ann', '2026-01-02'), (2, 'bob', NULL);
"""


@pytest.fixture(scope="module")
def datasource() -> Iterator[str]:
    with fresh_pg_database("fetcher_conn_ds") as url:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(DATASOURCE_SQL)
        yield url


@pytest.fixture
def store_url() -> Iterator[str]:
    with fresh_pg_database("fetcher_conn_store") as url:
        yield url


@pytest.fixture
async def api(store_url: str, tmp_path: Path) -> AsyncIterator[Api]:
    async with connections_api(store_url, tmp_path / "unused.sqlite3") as api:
        yield api


def _body(datasource: str, name: str = "local_pg", **changes: object) -> dict:
    return {
        "configName": name,
        "type": "POSTGRESQL",
        "host": "127.0.0.1",
        "port": 5432,
        "databaseName": datasource.rsplit("/", 1)[1],
        "userName": "postgres",
        "password": "trust ignores me @:/?#",
        **changes,
    }


async def _create(client: httpx.AsyncClient, datasource: str, **changes: object) -> dict:
    response = await client.post(BASE, json=_body(datasource, **changes), headers=PRODUCT)
    assert response.status_code == 201, response.text
    return response.json()


async def test_register_test_discover_and_validate(api: Api, datasource: str) -> None:
    client = api.client
    created = await _create(client, datasource, metadata={"team": "risk", "tier": 1})
    tested = await client.post(f"{BASE}/{created['id']}/test")
    assert tested.status_code == 200 and tested.json()["latencyMs"] >= 0
    schema = (await client.get(f"{BASE}/{created['id']}/schema")).json()
    assert [t["name"] for t in schema["tables"]] == ["accounts"]  # default scope, no views
    assert schema["tables"][0]["columns"] == [
        {"name": "id", "type": "bigint"},
        {"name": "name", "type": "text"},
        {"name": "opened", "type": "date"},
    ]
    sales = await client.patch(f"{BASE}/{created['id']}", json={"schema": "sales"})
    assert sales.status_code == 200 and sales.json()["schema"] == "sales"
    schema = (await client.get(f"{BASE}/{created['id']}/schema")).json()
    assert [t["name"] for t in schema["tables"]] == ["sales.orders"]

    path = f"{BASE}/validate-schema"
    ok = {"local_pg": {"public.accounts": ["*"], "sales.orders": ["Mixed", "total"]}}
    assert (await client.post(path, json={"mappedFields": ok})).status_code == 200
    bad = {"local_pg": {"accounts": ["mixed", "id"], "sales.orders": ["mixed"], "nope": ["a"]}}
    failed = await client.post(path, json={"mappedFields": bad})
    assert failed.status_code == 422
    assert [(e["type"], e.get("table"), e.get("field")) for e in failed.json()["errors"]] == [
        ("FIELD_NOT_FOUND", "accounts", "mixed"),
        ("TABLE_NOT_FOUND", "nope", None),
        ("FIELD_NOT_FOUND", "sales.orders", "mixed"),
    ]


async def test_lists_filter_on_postgresql(api: Api, datasource: str) -> None:
    client = api.client
    await _create(client, datasource, name="risk_pg", metadata={"team": "risk"})
    await _create(client, datasource, name="ops_pg", metadata={"team": "ops", "n": 1})
    listed = (await client.get(BASE, params={"metadata.team": "risk"})).json()
    assert [i["configName"] for i in listed["items"]] == ["risk_pg"] and listed["total"] == 1
    assert (await client.get(BASE, params={"metadata.n": "1"})).json()["total"] == 0
    ascending = (await client.get(BASE, params={"sortOrder": "asc", "type": "postgresql"})).json()
    assert [i["configName"] for i in ascending["items"]] == ["risk_pg", "ops_pg"]
    old = await client.get(BASE, params={"startDate": "2019-12-20", "endDate": "2020-01-01"})
    assert old.json()["total"] == 0


async def test_unassigned_then_concurrent_assign_has_one_winner(
    api: Api, store_url: str, datasource: str, tmp_path: Path
) -> None:
    created = await _create(api.client, datasource)
    stored = await api.repository.get(UUID(created["id"]), tenant=SINGLE_TENANT)
    assert stored is not None
    legacy = replace(stored, id=uuid4(), config_name="legacy", product_name="")
    await api.repository.add(legacy)
    listed = (await api.client.get(f"{BASE}/unassigned")).json()
    assert [i["configName"] for i in listed["items"]] == ["legacy"]

    # Separate engines (separate connection pools), as separate API processes would have.
    repositories = [repository_from_url(store_url, tmp_path / "unused.sqlite3") for _ in range(4)]
    cipher = api.services.connections.assign.cipher
    clock = api.services.connections.assign.clock
    try:
        calls = [
            AssignConnection(repositories[i % 4], cipher, clock)(
                legacy.id, f"product{i}", tenant=SINGLE_TENANT
            )
            for i in range(20)
        ]
        outcomes = await asyncio.gather(*calls, return_exceptions=True)
    finally:
        for repository in repositories:
            await repository.close()
    winners = [o for o in outcomes if isinstance(o, Connection)]
    assert len(winners) == 1
    losers = [o for o in outcomes if not isinstance(o, Connection)]
    assert all(isinstance(o, FetcherError) and o.code == "FET-1015" for o in losers)
    assert (await api.repository.get(legacy.id, tenant=SINGLE_TENANT)).product_name == winners[
        0
    ].product_name
    again = await api.client.post(f"{BASE}/{legacy.id}/assign", headers=PRODUCT)
    assert again.status_code == 409 and again.json()["code"] == "FET-1015"


def _versions(store_url: str, connection_id: str) -> tuple[str, ...]:
    with psycopg.connect(store_url) as conn:
        row = conn.execute(
            "SELECT password_key_version, ssl_ca_key_version FROM fetcher_connections "
            "WHERE id = %s",
            (UUID(connection_id),),
        ).fetchone()
    assert row is not None
    return tuple(row)


async def test_key_rotation(store_url: str, datasource: str, tmp_path: Path) -> None:
    unused = tmp_path / "unused.sqlite3"
    body = {"ssl": {"mode": "prefer", "ca": "not used by prefer"}}
    async with connections_api(store_url, unused, ring=KeyRing(MASTER_KEY, "1")) as v1:
        rotated = await _create(v1.client, datasource, name="rotated", **body)
        left = await _create(v1.client, datasource, name="left_behind")
    assert _versions(store_url, rotated["id"]) == ("1", "1")

    ring = KeyRing(NEW_KEY, "2", {"1": MASTER_KEY})
    async with connections_api(store_url, unused, ring=ring) as v2:
        assert (await v2.client.post(f"{BASE}/{rotated['id']}/test")).status_code == 200
        patched = await v2.client.patch(f"{BASE}/{rotated['id']}", json={"port": 5432})
        assert patched.status_code == 200, patched.text
    assert _versions(store_url, rotated["id"]) == ("2", "2")

    async with connections_api(store_url, unused, ring=KeyRing(NEW_KEY, "2")) as only_v2:
        assert (await only_v2.client.post(f"{BASE}/{rotated['id']}/test")).status_code == 200
        stale = await only_v2.client.post(f"{BASE}/{left['id']}/test")
        assert stale.status_code == 503
        assert stale.json()["message"] == (
            "credentials are encrypted with key version '1', which is not configured"
        )
        job = await only_v2.client.post(
            "/v1/fetcher",
            json={
                "dataRequest": {"mappedFields": {"left_behind": {"accounts": ["id"]}}},
                "metadata": {"source": "payments"},
            },
        )
        assert job.status_code == 400 and job.json()["code"] == "FET-1040"
        fixed = await only_v2.client.patch(f"{BASE}/{left['id']}", json={"password": "new"})
        assert fixed.status_code == 200
        assert (await only_v2.client.post(f"{BASE}/{left['id']}/test")).status_code == 200


def _environment(store_url: str, datasource: str, data_dir: Path, **extra: str) -> dict[str, str]:
    return {
        "FETCHER_DATABASE_URL": store_url,
        "FETCHER_DATA_DIR": str(data_dir),
        "APP_ENC_KEY": MASTER_KEY,
        "DATASOURCE_LEDGER_CONFIG_NAME": "ledger_books",
        "DATASOURCE_LEDGER_TYPE": "postgresql",
        "DATASOURCE_LEDGER_HOST": "127.0.0.1",
        "DATASOURCE_LEDGER_PORT": "5432",
        "DATASOURCE_LEDGER_DATABASE": datasource.rsplit("/", 1)[1],
        "DATASOURCE_LEDGER_USER": "postgres",
        "DATASOURCE_LEDGER_PASSWORD": "any thing",
        **extra,
    }


async def test_internal_datasources_from_the_environment(
    store_url: str, datasource: str, tmp_path: Path
) -> None:
    settings = Settings.from_env(_environment(store_url, datasource, tmp_path))
    ledger = internal_id("ledger_books")
    async with bootstrap(settings, roles={Role.API}) as fetcher:
        async with in_loop_client(create_app(fetcher.api)) as client:
            await _create(client, datasource)
            listed = (await client.get(BASE, params={"limit": 1})).json()
            assert [i["configName"] for i in listed["items"]] == ["ledger_books", "local_pg"]
            assert listed["items"][0]["id"] == str(ledger) and listed["total"] == 2
            page2 = (await client.get(BASE, params={"limit": 1, "page": 2})).json()
            assert page2["items"] == [] and page2["total"] == 1
            assert (await client.get(f"{BASE}/{ledger}")).json()["configName"] == "ledger_books"
            assert (await client.post(f"{BASE}/{ledger}/test")).status_code == 200
            schema = (await client.get(f"{BASE}/{ledger}/schema")).json()
            assert [t["name"] for t in schema["tables"]] == ["accounts"]
            assert (await client.delete(f"{BASE}/{ledger}")).status_code == 404
            assert (await client.patch(f"{BASE}/{ledger}", json={"port": 1})).status_code == 404
            job = await client.post(
                "/v1/fetcher",
                json={
                    "dataRequest": {"mappedFields": {"ledger_books": {"accounts": ["*"]}}},
                    "metadata": {"source": "any-product"},
                },
            )
            assert job.status_code == 202, job.text


async def test_ssrf_guard_from_the_environment(
    store_url: str, datasource: str, tmp_path: Path
) -> None:
    env = _environment(store_url, datasource, tmp_path, FETCHER_SSRF_GUARD="true")
    async with bootstrap(Settings.from_env(env), roles={Role.API}) as fetcher:
        async with in_loop_client(create_app(fetcher.api)) as client:
            refused = await client.post(BASE, json=_body(datasource), headers=PRODUCT)
            assert refused.status_code == 400 and refused.json()["code"] == "FET-0414"
            named = await _create(client, datasource, host="localhost")
            tested = await client.post(f"{BASE}/{named['id']}/test")
            assert tested.status_code == 400 and tested.json()["code"] == "FET-0414"
            schema = await client.get(f"{BASE}/{named['id']}/schema")
            assert schema.status_code == 400 and schema.json()["code"] == "FET-0414"
            job = await client.post(
                "/v1/fetcher",
                json={
                    "dataRequest": {"mappedFields": {"local_pg": {"accounts": ["id"]}}},
                    "metadata": {"source": "payments"},
                },
            )
            assert job.status_code == 400 and job.json()["code"] == "FET-0414"
            ledger = internal_id("ledger_books")  # operator-configured: not guarded
            assert (await client.post(f"{BASE}/{ledger}/test")).status_code == 200
