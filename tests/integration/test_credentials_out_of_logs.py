"""Credentials stay out of the logs even at DEBUG: neither SQLAlchemy nor the database drivers
(aiosqlite, asyncpg) write a password or an SSL secret, plain or sealed, when a connection is
created, read, changed or deleted, on SQLite and on PostgreSQL."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from uuid import UUID

import pytest

from domain.connection import Connection
from domain.tenant import SINGLE_TENANT
from tests.integration.conftest import fresh_pg_database
from tests.integration.connection_api import Api, connections_api

pytestmark = pytest.mark.integration

BASE = "/v1/management/connections"
PRODUCT = {"X-Product-Name": "payments"}
PLAIN_SECRETS = ("first-password-9f2c", "second-password-41ab", "CA-PEM-e1", "CERT-PEM-e2")
BODY = {
    "configName": "ledger_db",
    "type": "POSTGRESQL",
    "host": "db.example.com",
    "port": 5432,
    "databaseName": "ledger",
    "userName": "reader",
    "password": PLAIN_SECRETS[0],
    "ssl": {"mode": "verify-ca", "ca": PLAIN_SECRETS[2], "cert": PLAIN_SECRETS[3], "key": "KEY-e3"},
}


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest) -> Iterator[str | None]:
    if request.param == "sqlite":
        yield None
    else:
        with fresh_pg_database("fetcher_quiet_logs") as url:
            yield url


@pytest.fixture
async def api(database_url: str | None, tmp_path: Path) -> AsyncIterator[Api]:
    async with connections_api(database_url, tmp_path / "connections.sqlite3") as api:
        yield api


def _sealed(connection: Connection | None) -> list[str]:
    assert connection is not None and connection.password is not None
    assert connection.ssl is not None
    secrets = [connection.password, connection.ssl.ca, connection.ssl.cert, connection.ssl.key]
    return [s.ciphertext for s in secrets if s is not None]


async def test_no_credential_reaches_a_debug_log(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    for name in ("sqlalchemy", "aiosqlite", "asyncpg"):
        caplog.set_level(logging.DEBUG, logger=name)

    created = await api.client.post(BASE, json=BODY, headers=PRODUCT)
    assert created.status_code == 201, created.text
    identifier = UUID(created.json()["id"])
    sealed = _sealed(await api.repository.get(identifier, tenant=SINGLE_TENANT))
    path = f"{BASE}/{identifier}"
    changed = await api.client.patch(
        path,
        json={"password": PLAIN_SECRETS[1], "ssl": {"mode": "verify-ca", "ca": "CA-PEM-e4"}},
    )
    assert changed.status_code == 200, changed.text
    sealed += _sealed(await api.repository.get(identifier, tenant=SINGLE_TENANT))
    assert (await api.client.get(path)).status_code == 200
    assert (await api.client.get(BASE)).status_code == 200
    assert (await api.client.delete(path)).status_code == 204

    statements = [r for r in caplog.records if r.name.startswith(("sqlalchemy", "aiosqlite"))]
    assert len(statements) > 10, "the SQL layers logged nothing: the capture is not working"
    logged = caplog.text + "\n".join(r.getMessage() for r in caplog.records)
    assert len(sealed) == 6
    # SQLAlchemy shortens long values in its logs: a 16-character piece is enough to leak.
    leaked = [s for s in (*sealed, *PLAIN_SECRETS) if s[:16] in logged or s[-16:] in logged]
    assert leaked == []
