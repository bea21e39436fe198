"""The operational routes: health, readiness (its checks never show credentials), version."""

from __future__ import annotations

from dataclasses import replace

from litestar.testing import AsyncTestClient

from adapters.memory.messaging import RecordingWorkQueue
from entrypoints.composition import bootstrap
from entrypoints.http.app import create_app
from entrypoints.roles import Role
from tests.support.twins import in_memory_settings


async def test_health_readiness_version_and_the_openapi_document_answer(client):
    assert (await client.get("/health")).json() == {"status": "healthy"}
    ready = await client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["checks"]["sqlite"]["status"] == "up"
    assert (await client.get("/version")).json()["version"] == "0.0.0"
    schema = (await client.get("/openapi/openapi.json")).json()
    assert "/v1/fetcher" in schema["paths"]


class UnreachableBroker(RecordingWorkQueue):
    async def check(self) -> None:
        raise ConnectionError("cannot reach amqp://fetcher:hunter2@10.0.0.7:5672/ password=hunter2")


async def test_readyz_does_not_show_credentials_of_a_failing_check(app, tmp_path):
    async with bootstrap(
        in_memory_settings(tmp_path),
        roles={Role.API, Role.RELAY},
        overrides=replace(app.overrides(), work_queue=UnreachableBroker()),
    ) as fetcher:
        async with AsyncTestClient(create_app(fetcher.api)) as test_client:
            ready = await test_client.get("/readyz")
    assert ready.status_code == 503
    assert ready.json()["checks"]["local_broker"]["status"] == "down"
    assert "hunter2" not in ready.text and "10.0.0.7" not in ready.text
