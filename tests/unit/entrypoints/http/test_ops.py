"""The operational routes: health, readiness (its checks never show credentials), version."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from importlib import metadata
from pathlib import Path

import pytest
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
    assert (await client.get("/version")).json()["version"] == metadata.version("fetcher")
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


@pytest.mark.parametrize("env", [{}, {"VERSION": "3.1.4"}], ids=["package", "VERSION"])
async def test_every_place_reports_the_one_version(env, tmp_path):
    """``/version``, ``/readyz``, the OpenAPI document and ``fetcher --version`` agree: the
    package's version, or ``VERSION`` when set."""
    expected = env.get("VERSION") or metadata.version("fetcher")
    async with (
        bootstrap(in_memory_settings(tmp_path, **env), roles={Role.API}) as fetcher,
        AsyncTestClient(create_app(fetcher.api)) as client,
    ):
        assert (await client.get("/version")).json()["version"] == expected
        assert (await client.get("/readyz")).json()["version"] == expected
        assert (await client.get("/openapi/openapi.json")).json()["info"]["version"] == expected
    command = subprocess.run(
        [str(Path(sys.executable).parent / "fetcher"), "--version"],
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        check=False,
    )
    assert command.stdout == f"fetcher {expected}\n", command.stderr


OPENAPI_WITHOUT_EXAMPLE_FACTORY = """
import asyncio, sys
from entrypoints.composition import bootstrap
from entrypoints.http.app import create_app
from entrypoints.roles import Role
from entrypoints.settings import Settings

async def main():
    settings = Settings.from_env({"FETCHER_DATA_DIR": sys.argv[1]})
    async with bootstrap(settings, roles={Role.API}) as fetcher:
        document = create_app(fetcher.api).openapi_schema.to_schema()
    assert "/v1/fetcher" in document["paths"]

asyncio.run(main())
print(sorted(name for name in ("polyfactory", "faker") if name in sys.modules))
"""


def test_the_openapi_document_is_built_without_litestars_example_factory(tmp_path):
    """The image leaves out polyfactory and faker (deploy/install.sh): no response of the
    document may ask Litestar to generate examples, which imports them."""
    result = subprocess.run(
        [sys.executable, "-c", OPENAPI_WITHOUT_EXAMPLE_FACTORY, str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).resolve().parents[4],
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "[]"
