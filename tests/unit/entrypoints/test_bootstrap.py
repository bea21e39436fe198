"""The composition root: what each role is wired to, on the in-memory twins and on the
embedded default (SQLite files, an in-process queue, a folder, an events file)."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from uuid import UUID

import pytest
from litestar.testing import AsyncTestClient

from adapters.messaging.local import InProcessWorkConsumer
from entrypoints.composition import bootstrap
from entrypoints.composition.infrastructure import open_sql_adapters, wants_witnesses
from entrypoints.http.app import create_app
from entrypoints.roles import Role
from entrypoints.settings import Settings
from tests.support.twins import App, in_memory_settings

MASTER_KEY = base64.b64encode(bytes(range(32))).decode()
JOB = {
    "dataRequest": {"mappedFields": {"pgsql": {"accounts": ["id"]}}},
    "metadata": {"source": "payments"},
}


async def _until(condition, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.01)


async def test_a_job_runs_through_every_role_and_each_wakes_the_next(app: App) -> None:
    await app.connection()
    relay = app.fetcher.relay
    assert relay.waker is not None
    stop = asyncio.Event()
    waking = asyncio.create_task(relay.waker.run(stop))
    try:
        await _until(app.dispatcher.wake.is_set)  # told once on subscribing
        for follower in (app.dispatcher, app.emitter, relay.projection):
            follower.wake.clear()
        async with AsyncTestClient(create_app(app.fetcher.api)) as client:
            created = await client.post("/v1/fetcher", json=JOB)
        assert created.status_code == 202, created.text
        job_id = UUID(created.json()["jobId"])
        assert app.dispatcher.wake.is_set()  # the store told the followers of the new job
        assert relay.projection.wake.is_set()

        await app.dispatcher.run_once()
        assert [order.job_id for order in app.queue.published] == [job_id]
        app.emitter.wake.clear()
        consumer = app.fetcher.worker.consumer
        running = asyncio.create_task(consumer.run())
        try:
            await _until(app.emitter.wake.is_set)  # the worker's events woke the emitter
        finally:
            await consumer.stop()
            await running
    finally:
        stop.set()
        await waking

    await app.emitter.run_once()
    assert app.publisher.event_ids == [f"fetcher.job.completed.{job_id}"]


async def test_a_role_that_was_not_bootstrapped_is_refused(app: App, tmp_path: Path) -> None:
    async with bootstrap(
        in_memory_settings(tmp_path), roles={Role.RELAY}, overrides=app.overrides()
    ) as fetcher:
        assert fetcher.relay.dispatcher.name == "dispatcher"
        with pytest.raises(RuntimeError, match="api role was not bootstrapped"):
            _ = fetcher.api
        with pytest.raises(RuntimeError, match="worker role was not bootstrapped"):
            _ = fetcher.worker


async def test_a_relay_on_its_own_polls_the_log_more_often(app: App, tmp_path: Path) -> None:
    async with bootstrap(
        in_memory_settings(tmp_path), roles={Role.RELAY}, overrides=app.overrides()
    ) as alone:
        assert [poll_interval(loop) for loop in alone.relay.loops] == [0.2, 0.2, 0.2, 5.0, None]
    assert [poll_interval(loop) for loop in app.fetcher.relay.loops] == [0.5, 0.5, 0.5, 5.0, None]


def poll_interval(loop: object) -> float | None:
    """A polling loop's interval; None for the waker, which waits to be told."""
    return getattr(loop, "poll_interval", None)


async def test_the_embedded_default_wires_local_twins(tmp_path: Path) -> None:
    settings = Settings.from_env({"FETCHER_DATA_DIR": str(tmp_path), "APP_ENC_KEY": MASTER_KEY})
    async with bootstrap(settings) as fetcher:
        readiness = fetcher.api.probes.readiness
        assert readiness is fetcher.probes.readiness
        names = [dependency.name for dependency in readiness.dependencies]
        assert names == ["sqlite", "local_broker", "local_storage"]
        assert (await readiness.report()).healthy
        assert isinstance(fetcher.worker.consumer, InProcessWorkConsumer)
        assert fetcher.relay.requeue_on_start is not None  # the queue does not survive a restart
    assert (tmp_path / "fetcher.sqlite3").exists() and (tmp_path / "fetcher-data.sqlite3").exists()


async def test_the_api_alone_opens_no_work_queue_and_checks_no_broker(tmp_path: Path) -> None:
    settings = Settings.from_env({"FETCHER_DATA_DIR": str(tmp_path), "APP_ENC_KEY": MASTER_KEY})
    async with bootstrap(settings, roles={Role.API}) as fetcher:
        assert [d.name for d in fetcher.probes.readiness.dependencies] == ["sqlite"]


async def test_the_sql_adapters_share_one_engine_for_the_database(tmp_path: Path) -> None:
    settings = Settings.from_env({"FETCHER_DATA_DIR": str(tmp_path)})
    async with open_sql_adapters(settings) as tables:
        assert tables.connections._engine is tables.jobs._engine  # type: ignore[attr-defined]


async def test_the_worker_reuses_discovered_schemas_unless_told_not_to(tmp_path: Path) -> None:
    from application.connections.cached_discovery import SchemaCachingReader

    env = {"FETCHER_DATA_DIR": str(tmp_path), "APP_ENC_KEY": MASTER_KEY}
    async with bootstrap(Settings.from_env(env)) as fetcher:
        assert isinstance(fetcher.worker.run_job.reader, SchemaCachingReader)
    off = Settings.from_env({**env, "FETCHER_WORKER_SCHEMA_TTL_SECONDS": "0"})
    async with bootstrap(off) as fetcher:
        assert not isinstance(fetcher.worker.run_job.reader, SchemaCachingReader)


async def test_the_api_and_the_worker_remember_connection_lookups_unless_told_not_to(
    tmp_path: Path,
) -> None:
    from application.connections.cached import CachingConnectionRepository

    env = {"FETCHER_DATA_DIR": str(tmp_path), "APP_ENC_KEY": MASTER_KEY}
    async with bootstrap(Settings.from_env(env)) as fetcher:
        assert fetcher.api is not None and fetcher.worker is not None
        cached = fetcher.api.request_job.directory.repository
        assert isinstance(cached, CachingConnectionRepository)
        # The worker's are its own (a shorter window), forgotten on the API's writes.
        worker_repository = fetcher.worker.run_job.directory.repository
        assert isinstance(worker_repository, CachingConnectionRepository)
        assert worker_repository is not cached
        assert cached.inner is worker_repository.inner
        assert cached._linked == (worker_repository,)  # type: ignore[attr-defined]
    off = Settings.from_env({**env, "FETCHER_WORKER_CONNECTION_CACHE_SECONDS": "0"})
    async with bootstrap(off) as fetcher:
        assert fetcher.worker is not None
        worker_repository = fetcher.worker.run_job.directory.repository
        assert not isinstance(worker_repository, CachingConnectionRepository)


async def test_the_api_security_is_opened_from_the_settings_unless_overridden(
    app: App, tmp_path: Path
) -> None:
    from dataclasses import replace

    from entrypoints.http.auth import OPEN

    oidc = {
        "FETCHER_AUTH_ISSUER": "https://sso.example.com/realms/fetcher",
        "FETCHER_AUTH_AUDIENCE": "fetcher-api",
        "FETCHER_AUTH_HS256_SECRET": "s" * 32,
    }
    settings = in_memory_settings(tmp_path, **oidc)
    async with bootstrap(settings, roles={Role.API}, overrides=app.overrides()) as fetcher:
        assert fetcher.api.security.enabled
        assert create_app(fetcher.api).state.security is fetcher.api.security
    given = replace(app.overrides(), security=OPEN)
    async with bootstrap(settings, roles={Role.API}, overrides=given) as fetcher:
        assert fetcher.api.security is OPEN


@pytest.mark.parametrize(
    ("roles", "bucket", "witness", "opens", "warns"),
    [
        ({Role.RELAY}, True, True, True, False),
        ({Role.RELAY}, False, True, False, True),  # a relay on its own needs the bucket
        ({Role.API}, True, True, True, False),  # the console's Verify reads them back
        ({Role.API}, False, True, False, False),  # no bucket: nothing to compare, quietly
        ({Role.WORKER}, True, True, False, False),
        (set(Role), False, True, True, False),  # serve: the data folder
        (set(Role), True, False, False, False),  # FETCHER_AUDIT_WITNESS=false
    ],
)
def test_which_processes_open_the_audit_witnesses(
    roles: set[Role], bucket: bool, witness: bool, opens: bool, warns: bool, caplog, tmp_path
) -> None:
    env = {"FETCHER_DATA_DIR": str(tmp_path), "FETCHER_AUDIT_WITNESS": str(witness).lower()}
    if bucket:
        env["OBJECT_STORAGE_BUCKET"] = "results"
    settings = Settings.from_env(env)
    assert wants_witnesses(settings, frozenset(roles)) is opens
    assert ("audit.witness.off" in caplog.messages) is warns


async def test_an_api_with_a_bucket_compares_checkpoints_with_their_witnesses(
    tmp_path: Path,
) -> None:
    """Opening the bucket sends nothing: the API starts, and is ready, without it."""
    settings = Settings.from_env(
        {
            "FETCHER_DATA_DIR": str(tmp_path),
            "APP_ENC_KEY": MASTER_KEY,
            "OBJECT_STORAGE_BUCKET": "results",
            "OBJECT_STORAGE_ENDPOINT": "http://127.0.0.1:9",
        }
    )
    async with bootstrap(settings, roles={Role.API}) as fetcher:
        verify = fetcher.api.console.verify_job
        assert verify is not None and verify.witnesses is not None
        assert [d.name for d in fetcher.probes.readiness.dependencies] == ["sqlite"]
