"""``/health``, ``/readyz`` and ``/metrics`` as the reference's probes expect them (§7), on the
API and on the health port of the worker and the relay."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from importlib import metadata
from pathlib import Path

import pytest
from litestar.testing import AsyncTestClient
from prometheus_client.parser import text_string_to_metric_families

from adapters.memory.job_event_store import InMemoryJobEventStore
from adapters.memory.messaging import RecordingWorkQueue
from adapters.memory.result_storage import InMemoryResultStorage
from entrypoints.composition import bootstrap
from entrypoints.composition.readiness import (
    broker_dependency,
    database_dependency,
    storage_dependency,
)
from entrypoints.http.app import create_app
from entrypoints.http.ops import create_health_app
from entrypoints.roles import Role
from entrypoints.settings import Settings
from tests.support.twins import MASTER_KEY, in_memory_settings

TOP_LEVEL = {"status", "checks", "version", "deployment_mode"}
CHECK_FIELDS = {"status", "latency_ms", "tls", "error", "reason"}
STATUSES = {"up", "down", "degraded", "skipped", "n/a"}
READYZ_FAMILIES = ("readyz_check_duration_ms", "readyz_check_status", "selfprobe_result")


def embedded(tmp_path: Path, **env: str) -> Settings:
    return Settings.from_env({"FETCHER_DATA_DIR": str(tmp_path), "APP_ENC_KEY": MASTER_KEY, **env})


def assert_reference_shape(body: dict) -> None:
    assert set(body) == TOP_LEVEL
    assert body["status"] in {"healthy", "unhealthy"}
    for name, check in body["checks"].items():
        assert set(check) <= CHECK_FIELDS, name
        assert check["status"] in STATUSES, name
        if check["status"] in {"down", "degraded"}:
            assert check.get("error") or check.get("reason"), name
        if check["status"] == "up":
            assert isinstance(check["latency_ms"], int) and check["latency_ms"] >= 0
            assert "error" not in check


def families(text: str) -> dict[str, str]:
    return {family.name: family.type for family in text_string_to_metric_families(text)}


async def test_readyz_on_the_embedded_default_names_what_it_checks(tmp_path):
    settings = embedded(tmp_path, DEPLOYMENT_MODE="BYOC", OTEL_RESOURCE_SERVICE_VERSION="2.0.2")
    async with bootstrap(settings) as fetcher, AsyncTestClient(create_app(fetcher.api)) as client:
        ready = await client.get("/readyz")
    assert ready.status_code == 200, ready.text
    body = ready.json()
    assert_reference_shape(body)
    assert body["status"] == "healthy"
    assert list(body["checks"]) == ["sqlite", "local_broker", "local_storage"]
    assert (body["version"], body["deployment_mode"]) == ("2.0.2", "byoc")


async def test_version_and_mode_default_as_the_reference(tmp_path):
    async with (
        bootstrap(embedded(tmp_path), roles={Role.API}) as fetcher,
        AsyncTestClient(create_app(fetcher.api)) as client,
    ):
        body = (await client.get("/readyz")).json()
    assert (body["version"], body["deployment_mode"]) == (metadata.version("fetcher"), "local")
    assert list(body["checks"]) == ["sqlite"]  # the API alone opens no storage nor queue


def test_production_dependencies_carry_the_reference_names():
    settings = Settings.from_env(
        {
            "APP_ENC_KEY": MASTER_KEY,
            "FETCHER_DATABASE_URL": "postgresql://u:p@db:5432/fetcher",
            "RABBITMQ_URL": "amqps://u:p@broker:5671/",
            "OBJECT_STORAGE_BUCKET": "results",
        }
    )
    store, storage = InMemoryJobEventStore(), InMemoryResultStorage()
    database = database_dependency(settings, store.check)
    broker = broker_dependency(settings, store.check)
    s3 = storage_dependency(settings, storage.check)
    assert (database.name, broker.name, s3.name) == ("postgres", "rabbitmq", "s3")
    assert (database.tls, broker.tls, s3.tls) == (None, True, True)
    assert all(d.timeout == 2.0 for d in (database, broker, s3))
    plain = Settings.from_env(
        {
            "APP_ENC_KEY": MASTER_KEY,
            "RABBITMQ_URL": "amqp://u:p@broker:5672/",
            "OBJECT_STORAGE_ENDPOINT": "http://127.0.0.1:9100",
            "OBJECT_STORAGE_BUCKET": "results",
        }
    )
    assert broker_dependency(plain, store.check).tls is False
    assert storage_dependency(plain, storage.check).tls is False
    assert database_dependency(plain, store.check).name == "sqlite"
    assert broker_dependency(plain) is None  # nothing to check
    assert broker_dependency(embedded(Path(".")), store.check).name == "local_broker"


async def test_a_dependency_down_answers_503_and_moves_the_readyz_series(app, tmp_path):
    queue = RecordingWorkQueue()
    async with bootstrap(
        in_memory_settings(tmp_path), overrides=replace(app.overrides(), work_queue=queue)
    ) as fetcher:
        async with AsyncTestClient(create_app(fetcher.api)) as client:
            queue.unavailable = True
            ready = await client.get("/readyz")
            text = (await client.get("/metrics")).text
    assert ready.status_code == 503
    body = ready.json()
    assert_reference_shape(body)
    assert body["status"] == "unhealthy"
    assert body["checks"]["local_broker"]["status"] == "down"
    assert body["checks"]["local_broker"]["error"] == "simulated broker outage"
    assert body["checks"]["sqlite"]["status"] == "up"
    registry = fetcher.probes.metrics.registry
    labels = {"dep": "local_broker", "status": "down"}
    assert registry.get_sample_value("readyz_check_status_total", labels) == 1
    assert registry.get_sample_value("readyz_check_duration_ms_count", labels) == 1
    buckets = [
        s.labels["le"]
        for family in text_string_to_metric_families(text)
        if family.name == "readyz_check_duration_ms"
        for s in family.samples
        if s.name.endswith("_bucket") and s.labels["dep"] == "local_broker"
    ]
    assert buckets == [
        "1.0", "5.0", "10.0", "25.0", "50.0", "100.0", "250.0", "500.0", "1000.0", "2000.0",
        "5000.0", "+Inf",
    ]  # fmt: skip


async def test_readyz_while_draining(tmp_path):
    async with bootstrap(embedded(tmp_path)) as fetcher:
        async with AsyncTestClient(create_app(fetcher.api)) as client:
            fetcher.probes.readiness.start_draining()
            ready = await client.get("/readyz")
            health = await client.get("/health")
    assert ready.status_code == 503
    assert ready.json() == {
        "status": "unhealthy",
        "checks": {"draining": {"status": "down", "reason": "graceful drain in progress"}},
        "version": metadata.version("fetcher"),
        "deployment_mode": "local",
    }
    assert health.status_code == 200  # still alive while it drains
    registry = fetcher.probes.metrics.registry
    labels = {"dep": "draining", "status": "down"}
    assert registry.get_sample_value("readyz_check_status_total", labels) == 1


async def test_health_reflects_the_self_probe_and_recovers_when_the_dependency_does(app, tmp_path):
    storage = InMemoryResultStorage(unavailable=True)
    overrides = replace(app.overrides(), storage=storage)
    async with bootstrap(in_memory_settings(tmp_path), overrides=overrides) as fetcher:
        async with AsyncTestClient(create_app(fetcher.api)) as client:
            health = await client.get("/health")
            assert health.status_code == 503
            assert health.json() == {"status": "unhealthy", "reason": "self-probe failed"}
            registry = fetcher.probes.metrics.registry
            assert registry.get_sample_value("selfprobe_result", {"dep": "local_storage"}) == 0
            assert registry.get_sample_value("selfprobe_result", {"dep": "sqlite"}) == 1
            storage.unavailable = False
            deadline = time.monotonic() + 10
            while (await client.get("/health")).status_code != 200:
                assert time.monotonic() < deadline, "the self-probe was not repeated"
                await asyncio.sleep(0.1)
            assert (await client.get("/health")).json() == {"status": "healthy"}
            assert registry.get_sample_value("selfprobe_result", {"dep": "local_storage"}) == 1


async def test_metrics_exposes_the_reference_series_and_the_services(tmp_path):
    async with bootstrap(embedded(tmp_path)) as fetcher:
        async with AsyncTestClient(create_app(fetcher.api)) as client:
            await client.get("/readyz")
            response = await client.get("/metrics")
            open_metrics = await client.get(
                "/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"}
            )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    text = response.text
    for family in READYZ_FAMILIES:
        assert f"# HELP {family}" in text, family
    assert families(text)["readyz_check_duration_ms"] == "histogram"
    assert families(text)["readyz_check_status"] == "counter"
    assert families(text)["selfprobe_result"] == "gauge"
    assert 'selfprobe_result{dep="sqlite"} 1.0' in text
    assert 'readyz_check_status_total{dep="sqlite",status="up"} 1.0' in text
    for name in (
        "fetcher_jobs_requested",
        "fetcher_jobs_completed",
        "fetcher_jobs_failed",
        "fetcher_job_duration_seconds",
        "fetcher_job_result_rows",
        "fetcher_job_result_bytes",
        "fetcher_result_upload_seconds",
        "fetcher_lease_expiries",
        "fetcher_job_reclaims",
        "fetcher_publish_failures",
        "fetcher_publish_retries",
        "fetcher_follower_lag_notifications",
        "process_resident_memory_bytes",
    ):
        assert name in families(text), name
    assert open_metrics.headers["content-type"].startswith("application/openmetrics-text")
    assert open_metrics.text.endswith("# EOF\n")


@pytest.mark.parametrize(
    ("role", "names"),
    [
        (Role.WORKER, ["sqlite", "local_storage"]),
        (Role.RELAY, ["sqlite", "local_broker"]),
    ],
)
async def test_the_health_port_of_a_worker_or_a_relay(app, tmp_path, role, names):
    async with (
        bootstrap(in_memory_settings(tmp_path), roles={role}, overrides=app.overrides()) as fetcher,
        AsyncTestClient(create_health_app(fetcher.probes)) as client,
    ):
        health = await client.get("/health")
        ready = await client.get("/readyz")
        text = (await client.get("/metrics")).text
        api_route = await client.get("/v1/fetcher/0190b8a0-0000-7000-8000-000000000001")
        version = await client.get("/version")
    assert health.status_code == 200 and health.json() == {"status": "healthy"}
    assert ready.status_code == 200
    assert_reference_shape(ready.json())
    assert list(ready.json()["checks"]) == names
    for family in READYZ_FAMILIES:
        assert f"# HELP {family}" in text
    for name in names:
        assert f'selfprobe_result{{dep="{name}"}} 1.0' in text
    assert api_route.status_code == 404 and version.status_code == 404
