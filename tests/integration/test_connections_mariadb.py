"""The connection API against the real MariaDB on loopback: test, discovery, validate-schema and
a job request, with a user whose password a DSN would mangle (database and user dropped at the
end)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from uuid import uuid4

import pymysql
import pytest

from tests.integration.conftest import require_listening
from tests.integration.connection_api import Api, connections_api

pytestmark = pytest.mark.integration

HOST = os.environ.get("FETCHER_TEST_MYSQL_HOST", "127.0.0.1")
PORT = int(os.environ.get("FETCHER_TEST_MYSQL_PORT", "3306"))
BASE = "/v1/management/connections"
PRODUCT = {"X-Product-Name": "payments"}
PASSWORD = "p @:/?#&=+%' w"


def _admin() -> pymysql.Connection:
    return pymysql.connect(host=HOST, port=PORT, user="root", password="", autocommit=True)


@pytest.fixture(scope="module")
def mariadb() -> Iterator[tuple[str, str]]:
    require_listening(f"mysql://{HOST}:{PORT}", "MariaDB")
    suffix = uuid4().hex[:8]
    database, user = f"fetcher_conn_my_{suffix}", f"fetcher_conn_{suffix}"
    with _admin() as admin, admin.cursor() as cursor:
        cursor.execute(f"CREATE DATABASE `{database}`")
        cursor.execute(f"CREATE USER '{user}'@'%%' IDENTIFIED BY %s", (PASSWORD,))
        cursor.execute(f"GRANT SELECT ON `{database}`.* TO '{user}'@'%'")
        cursor.execute(
            f"CREATE TABLE `{database}`.customers (id BIGINT PRIMARY KEY, name VARCHAR(50), "
            "born DATE, `Mixed` TEXT)"
        )
        cursor.execute(f"INSERT INTO `{database}`.customers VALUES (1, 'ann', NULL, 'x')")
        cursor.execute(
            f"CREATE VIEW `{database}`.customer_names AS SELECT name FROM `{database}`.customers"
        )
    try:
        yield database, user
    finally:
        with _admin() as admin, admin.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS `{database}`")
            cursor.execute(f"DROP USER IF EXISTS '{user}'@'%'")


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[Api]:
    async with connections_api(None, tmp_path / "connections.sqlite3") as api:
        yield api


async def _create(api: Api, mariadb: tuple[str, str], **changes: object) -> dict:
    database, user = mariadb
    body = {
        "configName": "maria",
        "type": "MYSQL",
        "host": HOST,
        "port": PORT,
        "databaseName": database,
        "userName": user,
        "password": PASSWORD,
        **changes,
    }
    response = await api.client.post(BASE, json=body, headers=PRODUCT)
    assert response.status_code == 201, response.text
    return response.json()


async def test_test_discover_validate_and_request_a_job(api: Api, mariadb: tuple[str, str]) -> None:
    created = await _create(api, mariadb)
    tested = await api.client.post(f"{BASE}/{created['id']}/test")
    assert tested.status_code == 200, tested.text
    schema = (await api.client.get(f"{BASE}/{created['id']}/schema")).json()
    assert schema["type"] == "MYSQL"
    assert [t["name"] for t in schema["tables"]] == ["customers"]  # base tables only
    assert schema["tables"][0]["fields"] == ["Mixed", "born", "id", "name"]
    assert {c["name"]: c["type"] for c in schema["tables"][0]["columns"]}["born"] == "date"

    path = f"{BASE}/validate-schema"
    ok = {"maria": {"customers": ["id", "Mixed"]}}
    assert (await api.client.post(path, json={"mappedFields": ok})).status_code == 200
    wildcard = {"maria": {"customers": ["*"]}}
    assert (await api.client.post(path, json={"mappedFields": wildcard})).status_code == 200
    bad = {"maria": {"customers": ["mixed"], "customer_names": ["name"]}}
    failed = await api.client.post(path, json={"mappedFields": bad})
    assert failed.status_code == 422
    assert [(e["type"], e["table"]) for e in failed.json()["errors"]] == [
        ("TABLE_NOT_FOUND", "customer_names"),
        ("FIELD_NOT_FOUND", "customers"),
    ]
    job = await api.client.post(
        "/v1/fetcher",
        json={
            "dataRequest": {"mappedFields": {"maria": {"customers": ["*"]}}},
            "metadata": {"source": "Payments"},
        },
    )
    assert job.status_code == 202, job.text


async def test_failures_are_named_without_secrets(api: Api, mariadb: tuple[str, str]) -> None:
    wrong = await _create(api, mariadb, password="not the password")
    response = await api.client.post(f"{BASE}/{wrong['id']}/test")
    assert response.status_code == 502
    body = response.json()
    assert body["code"] == "FET-1041"
    assert body["message"].endswith("Cause: authentication failed.")
    assert "not the password" not in response.text
    missing = await _create(api, mariadb, configName="maria_gone", databaseName="no_such_db")
    response = await api.client.get(f"{BASE}/{missing['id']}/schema")
    assert response.status_code == 502 and response.json()["code"] == "FET-1041"
    bad_mode = {"configName": "maria_tls", "ssl": {"mode": "verify-full"}}
    refused = await api.client.post(
        BASE,
        json={
            "type": "MYSQL", "host": HOST, "port": PORT, "databaseName": "x", "userName": "u",
            "password": "p", **bad_mode,
        },
        headers=PRODUCT,
    )  # fmt: skip
    assert refused.status_code == 400 and "FET-0413" in refused.json()["fields"]["ssl.mode"]
