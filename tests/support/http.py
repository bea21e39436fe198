"""The HTTP API of the service on the in-memory twins: a test client, sample bodies, and the
check of the one error shape."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from entrypoints.http.app import create_app
from tests.support.twins import App

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
JOB = {
    "dataRequest": {"mappedFields": {"pgsql": {"accounts": ["id"]}}},
    "metadata": {"source": "payments"},
}


@pytest.fixture
async def client(app: App) -> AsyncIterator[AsyncTestClient[Any]]:
    async with AsyncTestClient(create_app(app.fetcher.api)) as test_client:
        yield test_client


def assert_error(response, status, code, message=None):
    assert response.status_code == status, response.text
    body = response.json()
    assert body["code"] == code, body
    assert set(body) <= {"code", "title", "message", "fields", "entityType"}
    if message is not None:
        assert body["message"] == message, body["message"]
    return body
